package backup

import "errors"

var (
	// ErrDamaged is an archive that is not a complete, intact backup:
	// truncated, an entry of another size or hash than the manifest names,
	// an unknown or repeated entry, a manifest missing or not last.
	ErrDamaged = errors.New("backup: the archive is damaged")
	// ErrManifest is a manifest that does not describe the archive's log:
	// another head, Merkle root, checkpoint or blob set than the log holds.
	ErrManifest = errors.New("backup: the manifest does not match the archive")
	// ErrFormat is a manifest of another format version.
	ErrFormat = errors.New("backup: unsupported backup format")
	// ErrNotEmpty is a restore target that exists and is not empty.
	ErrNotEmpty = errors.New("backup: the target directory is not empty")
	// ErrBlob is a referenced blob that cannot be copied intact.
	ErrBlob = errors.New("backup: a referenced blob is missing or damaged")
)
