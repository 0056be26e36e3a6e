package device

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"taskledger/client"
	"taskledger/client/localstate"
)

var pngSignature = []byte{0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}

// UploadEvidence uploads the PNG at path (named explicitly by the caller)
// to the running execution. Its SHA-256 and size are committed with the
// key before the upload; a file that changed or vanished stops the upload.
// Only the bytes are sent, never the path.
func (d *Device) UploadEvidence(ctx context.Context, path string, capturedAt time.Time) (client.EvidenceResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.st.Pending
	if p != nil && !(p.Kind == localstate.PendingEvidence && p.Path == path) {
		return client.EvidenceResult{}, fmt.Errorf("%w: %s %s", ErrPendingOther, p.Kind, p.Op)
	}
	if p == nil {
		a := d.st.Active
		if a == nil || a.ExecutionID == "" {
			return client.EvidenceResult{}, ErrNoActiveClaim
		}
		data, err := readPNG(path)
		if err != nil {
			return client.EvidenceResult{}, err
		}
		sum := sha256.Sum256(data)
		p = &localstate.Pending{Kind: localstate.PendingEvidence, Key: newKey(), TaskID: a.TaskID, Generation: a.Generation,
			ExecutionID: a.ExecutionID, Path: path, SHA256: hex.EncodeToString(sum[:]), Size: int64(len(data)),
			CapturedAt: capturedAt.UTC().Truncate(time.Millisecond), CreatedAt: d.clock.Now().UTC()}
		if err := d.apply(localstate.Change{Pending: p}); err != nil {
			return client.EvidenceResult{}, err
		}
		p = d.st.Pending
	}
	return d.sendEvidence(ctx, p)
}

func (d *Device) sendEvidence(ctx context.Context, p *localstate.Pending) (client.EvidenceResult, error) {
	a := d.st.Active
	if a == nil || a.TaskID != p.TaskID || d.claimToken == "" {
		if err := d.apply(localstate.Change{ClearPending: true}); err != nil {
			return client.EvidenceResult{}, err
		}
		return client.EvidenceResult{}, ErrNoActiveClaim
	}
	data, err := readPNG(p.Path)
	sum := sha256.Sum256(data)
	if err == nil && (hex.EncodeToString(sum[:]) != p.SHA256 || int64(len(data)) != p.Size) {
		err = fmt.Errorf("%w: the file changed after it was recorded", ErrEvidence)
	}
	if err != nil {
		if aerr := d.apply(localstate.Change{ClearPending: true}); aerr != nil {
			return client.EvidenceResult{}, aerr
		}
		d.log.Error("evidence upload stopped", "task", p.TaskID, "err", err.Error())
		return client.EvidenceResult{}, err
	}
	res, err := d.c.Evidence(ctx, client.EvidenceCall{TaskID: p.TaskID, Key: p.Key, ClaimToken: d.claimToken,
		Generation: p.Generation, ExecutionID: p.ExecutionID, CapturedAt: p.CapturedAt, PNG: data, SHA256: p.SHA256, Size: p.Size})
	var ae *client.APIError
	switch {
	case err == nil, errors.As(err, &ae):
		if aerr := d.apply(localstate.Change{ClearPending: true}); aerr != nil {
			return client.EvidenceResult{}, aerr
		}
	}
	if err == nil {
		d.log.Info("evidence uploaded", "task", p.TaskID, "evidence", res.EvidenceID, "sha256", res.SHA256)
	}
	return res, err
}

// readPNG reads a regular .png file of at most 8 MiB whose signature and
// IHDR chunk are right. No directory is listed, no other type accepted.
func readPNG(path string) ([]byte, error) {
	if !strings.EqualFold(filepath.Ext(path), ".png") {
		return nil, fmt.Errorf("%w: only .png files are accepted", ErrEvidence)
	}
	st, err := os.Lstat(path)
	if err != nil {
		return nil, fmt.Errorf("%w: the file is missing", ErrEvidence)
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: not a regular file", ErrEvidence)
	}
	if st.Size() > client.MaxEvidence || st.Size() < 33 {
		return nil, fmt.Errorf("%w: size must be 33 bytes to 8 MiB", ErrEvidence)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: the file cannot be opened", ErrEvidence)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, client.MaxEvidence+1))
	if err != nil || len(data) > client.MaxEvidence {
		return nil, fmt.Errorf("%w: the file cannot be read", ErrEvidence)
	}
	if !bytes.HasPrefix(data, pngSignature) || binary.BigEndian.Uint32(data[8:12]) != 13 || string(data[12:16]) != "IHDR" {
		return nil, fmt.Errorf("%w: not a PNG", ErrEvidence)
	}
	return data, nil
}
