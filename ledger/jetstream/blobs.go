package jetstream

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"

	natsjs "github.com/nats-io/nats.go/jetstream"

	"taskledger/ledger"
)

// Blobs is a ledger.BlobStore in the object store NAME_BLOBS: objects named
// by the SHA-256 (hex) of their content, same storage and replicas as the
// stream. A blob is stored before the event that references it is
// appended; one no event references is harmless garbage.
type Blobs struct {
	l   *Log
	obs natsjs.ObjectStore
}

var _ ledger.BlobStore = (*Blobs)(nil)

// Blobs opens (creating if needed) the log's object store.
func (l *Log) Blobs() (*Blobs, error) {
	ctx, cancel := l.ctx()
	defer cancel()
	obs, err := l.js.CreateOrUpdateObjectStore(ctx, natsjs.ObjectStoreConfig{Bucket: l.cfg.Name + "_BLOBS",
		Storage: natsjs.FileStorage, Replicas: l.cfg.Replicas})
	if err != nil {
		return nil, fmt.Errorf("jetstream: object store %s_BLOBS: %w", l.cfg.Name, err)
	}
	return &Blobs{l: l, obs: obs}, nil
}

// Put stores data (once: the same content is not stored again) and returns
// its SHA-256 (hex).
func (b *Blobs) Put(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	name := hex.EncodeToString(sum[:])
	ctx, cancel := b.l.ctx()
	defer cancel()
	if info, err := b.obs.GetInfo(ctx, name); err == nil && info.Size == uint64(len(data)) {
		return name, nil
	}
	if _, err := b.obs.PutBytes(ctx, name, data); err != nil {
		return "", fmt.Errorf("jetstream: blob write: %w", err)
	}
	return name, nil
}

// Get returns the blob named by sha (hex), checked against its name.
func (b *Blobs) Get(sha string) ([]byte, error) {
	if !ledger.IsBlobName(sha) {
		return nil, ledger.ErrNotFound
	}
	ctx, cancel := b.l.ctx()
	defer cancel()
	data, err := b.obs.GetBytes(ctx, sha)
	if errors.Is(err, natsjs.ErrObjectNotFound) {
		return nil, ledger.ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("jetstream: blob read: %w", err)
	}
	if err := ledger.CheckBlobContent(sha, data); err != nil {
		return nil, err
	}
	return data, nil
}
