package main

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/schollz/progressbar/v3"

	"taskledger/audit/checkpoint"
	"taskledger/backup"
	"taskledger/internal/durable"
	"taskledger/ledger"

	"github.com/spf13/cobra"
)

// cmdBackup: `backup --out FILE [--data DIR | --server URL]` — the backup
// archive of a stopped ledger, or of a running server's through
// GET /api/v1/admin/backup (package backup). The file is written as
// FILE.partial, fsynced and renamed: FILE exists only complete.
func newBackupCmd(stdout, stderr io.Writer) *cobra.Command {
	var data, out, led *string
	var r remoteFlags
	c := command("backup", func(pos []string) int {
		var err error
		if len(pos) != 0 || *out == "" {
			fmt.Fprintln(stderr, "usage: taskledger backup --out FILE [--data DIR | --server URL [--token-file F] [--ca-file F]]")
			return 2
		}
		if *led != "" {
			return fail(stderr, "backup reads a bbolt ledger (--data, or --server of a bbolt node); a cluster's log (--ledger %s) is not backed up by taskledger: back up its JetStream stream with NATS's tools (nats stream backup)", *led)
		}
		if _, err := os.Lstat(*out); err == nil {
			return fail(stderr, "%s exists: give a new file", *out)
		}
		start := time.Now() //tl:wallclock backup duration, reported to the operator
		var m *backup.Manifest
		var n int64
		if r.server != "" {
			m, n, err = remoteBackup(r, *out, stderr)
		} else {
			m, n, err = offlineBackup(*data, *out, stderr)
		}
		if err != nil {
			return fail(stderr, "backup: %v", err)
		}
		elapsed := time.Since(start)
		fmt.Fprintf(stdout, "backup %s: head seq %d, %d blobs, %d bytes in %.3fs (%.1f MB/s)\n",
			*out, m.HeadSeq, len(m.Blobs), n, elapsed.Seconds(), float64(n)/1e6/max(elapsed.Seconds(), 1e-9))
		return 0
	})
	fs := c.Flags()
	data = envString(fs, "data", "./data", "data directory of a stopped ledger")
	out = fs.String("out", "", "the archive file to write (must not exist)")
	r.registerConn(fs, true)
	led = fs.String("ledger", "", "refused: a cluster's JetStream log is not backed up by this command")
	return c
}

// offlineBackup writes the archive of the stopped ledger in dir.
func offlineBackup(dir, out string, stderr io.Writer) (*backup.Manifest, int64, error) {
	if !ledger.Exists(dir) {
		return nil, 0, fmt.Errorf("no ledger in %s (--data)", dir)
	}
	store, err := ledger.Open(dir, ledger.Options{ReadOnly: true})
	if errors.Is(err, ledger.ErrInUse) {
		return nil, 0, fmt.Errorf("the ledger in %s is in use by another process (a running server is backed up with --server URL)", dir)
	}
	if err != nil {
		return nil, 0, err
	}
	defer store.Close()
	key, _, err := checkpoint.LoadOrCreateKey(dir) // a ledger never served has none yet
	if err != nil {
		return nil, 0, err
	}
	var m *backup.Manifest
	var n int64
	err = store.View(func(v *ledger.View) error {
		now := time.Now() //tl:wallclock the checkpoint's time of an offline backup
		p, err := backup.NewPlan(v, backup.Source{DataDir: dir, Key: key, Now: now})
		if err != nil {
			return err
		}
		m, n, err = writeArchive(out, p.Size(), stderr, func(w io.Writer) (*backup.Manifest, error) { return p.Write(w) })
		return err
	})
	return m, n, err
}

// remoteBackup streams GET /api/v1/admin/backup into out, reading the tar
// as it arrives: a stream cut short has no manifest and is refused.
func remoteBackup(r remoteFlags, out string, stderr io.Writer) (*backup.Manifest, int64, error) {
	c, err := r.client()
	if err != nil {
		return nil, 0, err
	}
	c.http.Timeout = 0 // a large log takes longer than a request's minute; the server cuts a stalled stream
	req, err := http.NewRequest(http.MethodGet, c.base+"/api/v1/admin/backup", nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("server %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		ae := &apiError{Status: resp.StatusCode}
		_ = json.Unmarshal(b, ae)
		if resp.StatusCode == http.StatusUnauthorized {
			ae.Code, ae.Message = "unauthorized", "the admin token is missing, unknown or revoked"
		}
		if resp.StatusCode == http.StatusNotFound && ae.Code == "not_found" {
			ae.Message = "this server serves no backup (a cluster node, or an older taskledger)"
		}
		return nil, 0, ae
	}
	size, _ := strconv.ParseInt(resp.Header.Get("X-Backup-Size"), 10, 64)
	return writeArchive(out, size, stderr, func(w io.Writer) (*backup.Manifest, error) {
		return readManifest(io.TeeReader(bufio.NewReaderSize(resp.Body, 1<<20), w))
	})
}

// readManifest reads a whole archive and returns its last entry, the
// manifest (entries are not checked here: restore does that).
func readManifest(r io.Reader) (*backup.Manifest, error) {
	tr := tar.NewReader(r)
	var m *backup.Manifest
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("the archive was cut short: %w", err)
		}
		m = nil
		if hdr.Name == backup.EntryManifest {
			m = new(backup.Manifest)
			if err := json.NewDecoder(tr).Decode(m); err != nil {
				return nil, fmt.Errorf("the manifest: %w", err)
			}
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return nil, fmt.Errorf("the archive was cut short: %w", err)
		}
	}
	if m == nil {
		return nil, errors.New("the archive was cut short: it does not end with its manifest")
	}
	return m, nil
}

// writeArchive writes out.partial through fill (buffered, counted, with a
// progress bar on a terminal), fsyncs it and renames it to out.
func writeArchive(out string, total int64, stderr io.Writer, fill func(io.Writer) (*backup.Manifest, error)) (*backup.Manifest, int64, error) {
	tmp := out + ".partial"
	f, direct, err := openDirect(tmp)
	if err != nil {
		return nil, 0, err
	}
	ok := false
	defer func() {
		if !ok {
			f.Close()
			os.Remove(tmp)
		}
	}()
	var dst io.Writer
	var flush func() error
	if direct {
		dw := newDirectWriter(f)
		dst, flush = dw, dw.Flush
	} else {
		bw := bufio.NewWriterSize(durable.Writeback(f), 1<<20)
		dst, flush = bw, bw.Flush
	}
	sink := dst
	var bar *progressbar.ProgressBar
	if isTerminal(stderr) {
		bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription("backup"), progressbar.OptionShowBytes(true),
			progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
		sink = io.MultiWriter(dst, barWriter{bar})
	}
	cw := &countWriter{w: sink}
	m, err := fill(cw)
	if err == nil {
		err = flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if err == nil {
		err = f.Close()
	}
	if err == nil {
		err = os.Rename(tmp, out)
	}
	if err == nil {
		err = ledger.SyncDir(dirOf(out))
	}
	if bar != nil {
		_ = bar.Finish()
	}
	if err != nil {
		return nil, 0, err
	}
	ok = true
	return m, cw.n, nil
}

func dirOf(path string) string {
	if i := strings.LastIndexByte(path, os.PathSeparator); i >= 0 {
		return path[:i+1]
	}
	return "."
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// barWriter advances a progress bar and never fails the copy: the total
// is an estimate (the manifest's size is not in it), so it grows the bar's
// maximum when the archive passes it.
type barWriter struct{ bar *progressbar.ProgressBar }

func (b barWriter) Write(p []byte) (int, error) {
	st := b.bar.State()
	if next := st.CurrentNum + int64(len(p)); next > st.Max {
		b.bar.ChangeMax64(next)
	}
	_ = b.bar.Add(len(p))
	return len(p), nil
}
