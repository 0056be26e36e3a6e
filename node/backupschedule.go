package node

import (
	"context"
	"io"
	"time"

	"github.com/rs/zerolog"

	"taskledger/api"
	"taskledger/backup"
	"taskledger/commands"
)

// backupScheduler writes a backup archive into a directory every interval
// (serve --backup-dir, --backup-every, --backup-keep) while the node
// serves, skipping a head that is already backed up there, and keeps the
// newest few.
type backupScheduler struct {
	dir     string
	every   time.Duration
	keep    int
	run     api.BackupFunc
	head    func() uint64
	log     zerolog.Logger
	written func(path string, err error)
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
}

func startBackupScheduler(cfg Config, run api.BackupFunc, eng *commands.Engine) *backupScheduler {
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.BackupKeep < 1 {
		cfg.BackupKeep = 1
	}
	s := &backupScheduler{dir: cfg.BackupDir, every: cfg.BackupEvery, keep: cfg.BackupKeep, run: run,
		head: func() uint64 { return eng.Head().Seq }, log: cfg.Logger, written: cfg.BackupWritten,
		ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go s.loop()
	return s
}

func (s *backupScheduler) loop() {
	defer close(s.done)
	t := time.NewTicker(s.every)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		path, err := s.once()
		if s.written != nil {
			s.written(path, err) // "" and nil: skipped, nothing new
		}
	}
}

// once writes one archive and prunes the directory, unless the head is
// already backed up there; it returns the path written ("" when skipped).
func (s *backupScheduler) once() (string, error) {
	if seq, ok := backup.Newest(s.dir); ok && seq >= s.head() {
		return "", nil // nothing committed since that archive
	}
	path, err := backup.WriteFile(s.dir, func(w io.Writer) (string, error) {
		var seq uint64
		err := s.run(ctxWriter{s.ctx, w}, func(headSeq uint64, _ int64) { seq = headSeq })
		return backup.FileName(seq), err
	})
	if err != nil {
		s.log.Error().Err(err).Str("dir", s.dir).Msg("scheduled backup failed; the next interval tries again")
		return "", err
	}
	removed, err := backup.Prune(s.dir, s.keep)
	if err != nil {
		s.log.Warn().Err(err).Msg("removing old scheduled backups failed")
	}
	s.log.Info().Str("path", path).Int("removed", len(removed)).Msg("scheduled backup written")
	return path, nil
}

func (s *backupScheduler) close() {
	if s != nil {
		s.cancel()
		<-s.done
	}
}

// ctxWriter stops a scheduled backup at shutdown: its writes fail once the
// node closes, which ends the backup's read transaction.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c ctxWriter) Write(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(b)
}
