//go:build linux

// Package powercut is a file system for tests that loses what a power cut
// loses: a FUSE loopback mount over a backing directory that remembers, for
// every file, its content as of its last fsync (or fdatasync). Cut unmounts
// it and puts every file of the backing directory back to that content: a
// file written since its last sync loses those writes, a file created and
// never synced is empty. Names (creations, renames, removals) are kept as
// they are at the cut, as a journaling file system's metadata would be; the
// model is ext4's data=writeback: data is durable only when synced. A cut
// may also tear the writes made since the last sync: a prefix of the new
// content survives over the old (a write cut off part way).
//
// Mounting needs /dev/fuse and the right to mount (root: CI runs as root).
package powercut

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	gofs "github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"
)

// FS is one mount.
type FS struct {
	backing, mnt string
	server       *fuse.Server

	mu      sync.Mutex
	durable map[uint64][]byte // inode in the backing directory → content as of its last sync
	syncs   int
}

// Mount mounts a loopback of backing at mnt. What backing holds now counts
// as durable.
func Mount(backing, mnt string) (*FS, error) {
	f := &FS{backing: backing, mnt: mnt, durable: map[uint64][]byte{}}
	err := filepath.WalkDir(backing, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		return f.record(p)
	})
	if err != nil {
		return nil, err
	}
	var st syscall.Stat_t
	if err := syscall.Stat(backing, &st); err != nil {
		return nil, err
	}
	root := &gofs.LoopbackRoot{Path: backing, Dev: uint64(st.Dev)}
	root.RootNode = &node{LoopbackNode: &gofs.LoopbackNode{RootData: root}, fs: f}
	f.server, err = gofs.Mount(mnt, root.RootNode, &gofs.Options{MountOptions: fuse.MountOptions{
		DirectMountStrict: true, FsName: "powercut", Name: "powercut"}})
	if err != nil {
		return nil, fmt.Errorf("powercut: mount %s: %w", mnt, err)
	}
	return f, nil
}

// Syncs counts the file syncs seen so far.
func (f *FS) Syncs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.syncs
}

// Cut unmounts (every process using the mount must be gone: kill it first)
// and puts each file of the backing directory back to its content as of
// its last sync. With tear, each file that lost writes keeps, with odds of
// one in two, a random prefix of what was written since (a torn write). It
// reports how many files lost writes and how many of them were torn.
func (f *FS) Cut(tear *rand.Rand) (lost, torn int, err error) {
	if err := f.server.Unmount(); err != nil {
		return 0, 0, fmt.Errorf("powercut: unmount %s: %w", f.mnt, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	err = filepath.WalkDir(f.backing, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		ino, err := inode(p)
		if err != nil {
			return err
		}
		now, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		kept := f.durable[ino] // nil: never synced, nothing of it survives
		if string(now) == string(kept) {
			return nil
		}
		lost++
		if tear != nil && tear.IntN(2) == 0 {
			n := tear.IntN(len(now) + 1)
			mixed := append([]byte(nil), now[:n]...)
			if n < len(kept) {
				mixed = append(mixed, kept[n:]...)
			}
			kept = mixed
			torn++
		}
		return os.WriteFile(p, kept, d.Type().Perm()|0o600)
	})
	return lost, torn, err
}

func (f *FS) record(p string) error {
	ino, err := inode(p)
	if err != nil {
		return err
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.durable[ino] = b
	f.syncs++
	f.mu.Unlock()
	return nil
}

func inode(p string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat(p, &st); err != nil {
		return 0, err
	}
	return st.Ino, nil
}

// node is a loopback node whose fsync of a regular file also records the
// file's content as durable.
type node struct {
	*gofs.LoopbackNode
	fs *FS
}

var (
	_ gofs.NodeFsyncer     = (*node)(nil)
	_ gofs.NodeWrapChilder = (*node)(nil)
)

// WrapChild makes every node of the mount a node of this kind.
func (n *node) WrapChild(_ context.Context, ops gofs.InodeEmbedder) gofs.InodeEmbedder {
	return &node{LoopbackNode: ops.(*gofs.LoopbackNode), fs: n.fs}
}

func (n *node) Fsync(ctx context.Context, h gofs.FileHandle, flags uint32) syscall.Errno {
	if s, ok := h.(gofs.FileFsyncer); ok {
		if errno := s.Fsync(ctx, flags); errno != 0 {
			return errno
		}
	}
	p := filepath.Join(n.RootData.Path, n.Path(n.RootData.RootNode.EmbeddedInode()))
	if st, err := os.Stat(p); err != nil || !st.Mode().IsRegular() {
		return 0 // a directory: names are kept as they are anyway
	}
	if err := n.fs.record(p); err != nil {
		var errno syscall.Errno
		if errors.As(err, &errno) {
			return errno
		}
		return syscall.EIO
	}
	return 0
}
