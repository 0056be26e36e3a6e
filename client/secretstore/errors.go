package secretstore

import "errors"

var (
	// ErrNoKeySource means neither an OS credential store nor a key file is
	// available: enrollment refuses rather than store a token in plain text.
	ErrNoKeySource = errors.New("secretstore: no key source (pass --key-file PATH to create an encryption key file)")
	// ErrUnavailable means the requested key source does not exist on this
	// platform.
	ErrUnavailable = errors.New("secretstore: key source not available on this platform")
	// ErrBadKeyFile means the key file is missing, malformed or readable by
	// other users.
	ErrBadKeyFile = errors.New("secretstore: bad key file")
	// ErrKeychain means the OS keychain could not store, find or read the
	// key (locked, no answer, entry removed).
	ErrKeychain = errors.New("secretstore: OS keychain")
	// ErrDecrypt means a sealed secret could not be opened: the state is
	// damaged or another key is in use. Nothing may be sent.
	ErrDecrypt = errors.New("secretstore: cannot decrypt a stored secret (damaged state or wrong key)")
)
