package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spf13/pflag"
)

// backupFlags are serve's scheduled-backup settings.
type backupFlags struct {
	dir, every, keep string
}

func (f *backupFlags) register(fs *pflag.FlagSet) {
	str := func(p *string, name, def, usage string) { envStringVar(fs, p, name, def, usage) }
	str(&f.dir, "backup-dir", "", "write a backup archive into this directory every --backup-every (default: no scheduled backup)")
	str(&f.every, "backup-every", "24h", "with --backup-dir: time between scheduled backups (1m–720h)")
	str(&f.keep, "backup-keep", "7", "with --backup-dir: scheduled backups kept, the newest (1–1000)")
}

// backupSchedule is the validated schedule (dir "": none).
type backupSchedule struct {
	dir   string
	every time.Duration
	keep  int
}

// config checks the settings; the directory is created (mode 0700) if
// missing and must not be the data directory or inside it.
func (f *backupFlags) config(dataDir string, cluster bool) (backupSchedule, error) {
	every, err := duration("backup-every", f.every, time.Minute, 720*time.Hour)
	if err != nil {
		return backupSchedule{}, err
	}
	keep, err := strconv.Atoi(f.keep)
	if err != nil || keep < 1 || keep > 1000 {
		return backupSchedule{}, fmt.Errorf("--backup-keep: %q is outside its bounds 1 – 1000", f.keep)
	}
	if f.dir == "" {
		return backupSchedule{}, nil
	}
	if cluster {
		return backupSchedule{}, fmt.Errorf("--backup-dir is refused with --ledger: a cluster's log is a JetStream stream (back it up with nats stream backup)")
	}
	dir, err := filepath.Abs(f.dir)
	if err != nil {
		return backupSchedule{}, fmt.Errorf("--backup-dir: %w", err)
	}
	data, err := filepath.Abs(dataDir)
	if err != nil {
		return backupSchedule{}, fmt.Errorf("--data: %w", err)
	}
	if rel, err := filepath.Rel(data, dir); err == nil && (rel == "." || filepath.IsLocal(rel)) {
		return backupSchedule{}, fmt.Errorf("--backup-dir %s is inside the data directory %s: keep backups apart from what they back up", f.dir, dataDir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return backupSchedule{}, fmt.Errorf("--backup-dir: %w", err)
	}
	probe, err := os.CreateTemp(dir, ".taskledger-write-check-*")
	if err != nil {
		return backupSchedule{}, fmt.Errorf("--backup-dir %s is not writable: %w", f.dir, err)
	}
	probe.Close()
	os.Remove(probe.Name())
	return backupSchedule{dir: dir, every: every, keep: keep}, nil
}
