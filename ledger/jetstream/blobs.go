package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

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

// Blobs binds the log's object store, creating it when it does not exist
// (unless the log is read only); one of other replicas or storage is a
// *ConfigError, never updated. With a start timeout it waits for the
// servers as Open does.
func (l *Log) Blobs() (*Blobs, error) {
	name := l.cfg.Name + "_BLOBS"
	var obs natsjs.ObjectStore
	err := l.retry("the object store "+name, func() error {
		_, err := l.ensure(resource{kind: KindObjectStore, name: name, stream: "OBJ_" + name,
			want: shape{kind: KindObjectStore, replicas: l.cfg.Replicas, storage: natsjs.FileStorage},
			create: func(ctx context.Context) error {
				_, err := l.js.CreateObjectStore(ctx, natsjs.ObjectStoreConfig{Bucket: name,
					Storage: natsjs.FileStorage, Replicas: l.cfg.Replicas})
				return err
			}})
		if err != nil {
			return err
		}
		ctx, cancel := l.ctx()
		defer cancel()
		if obs, err = l.js.ObjectStore(ctx, name); err != nil {
			return fmt.Errorf("jetstream: object store %s: %w", name, err)
		}
		if _, err := obs.GetInfo(ctx, "taskledger-probe"); err != nil && !errors.Is(err, natsjs.ErrObjectNotFound) {
			return fmt.Errorf("jetstream: object store %s: %w", name, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &Blobs{l: l, obs: obs}, nil
}

// BlobRefresh is how old a stored blob may be for Put to keep it as it
// is; an older one is put again, so that its stored time says it may be
// named by an event about to be appended (the sequencer's collection
// spares every blob stored less than its grace ago, D383).
const BlobRefresh = 10 * time.Minute

// Put stores data (once: the same content is not stored again unless it
// was stored more than BlobRefresh ago) and returns its SHA-256 (hex).
func (b *Blobs) Put(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	name := hex.EncodeToString(sum[:])
	ctx, cancel := b.l.ctx()
	defer cancel()
	if info, err := b.obs.GetInfo(ctx, name); err == nil && info.Size == uint64(len(data)) &&
		time.Since(info.ModTime) < BlobRefresh { //tl:wallclock against the server's stored time, not a decision of the ledger
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

// BlobInfo is one stored blob as the object store lists it.
type BlobInfo struct {
	Name   string
	Size   uint64
	Stored time.Time // when its content was last put (the server's time)
}

// List returns every blob the object store holds.
func (b *Blobs) List() ([]BlobInfo, error) {
	ctx, cancel := b.l.ctx()
	defer cancel()
	infos, err := b.obs.List(ctx)
	if errors.Is(err, natsjs.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jetstream: list blobs: %w", err)
	}
	out := make([]BlobInfo, 0, len(infos))
	for _, in := range infos {
		if in.Deleted || !ledger.IsBlobName(in.Name) {
			continue
		}
		out = append(out, BlobInfo{Name: in.Name, Size: in.Size, Stored: in.ModTime})
	}
	return out, nil
}

// Delete removes a blob (one that is not there is no error).
func (b *Blobs) Delete(sha string) error {
	ctx, cancel := b.l.ctx()
	defer cancel()
	if err := b.obs.Delete(ctx, sha); err != nil && !errors.Is(err, natsjs.ErrObjectNotFound) {
		return fmt.Errorf("jetstream: delete blob: %w", err)
	}
	return nil
}
