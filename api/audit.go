package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v4"

	"taskledger/audit/merkle"
	"taskledger/audit/transparency"
)

// Errors of the checkpoint and proof routes (stable codes).
var (
	errProofParam     = newErr(http.StatusBadRequest, "invalid_proof_parameter", "seq, size, from and to must be positive decimal integers; unknown parameters are refused")
	errProofRange     = newErr(http.StatusBadRequest, "proof_range_invalid", "seq must not exceed size, and from must not exceed to")
	errTreeSize       = newErr(http.StatusNotFound, "tree_size_unknown", "the tree size is beyond the log")
	errCheckpointNone = newErr(http.StatusNotFound, "checkpoint_not_found", "no checkpoint was signed at that size")
	errNoTransparency = newErr(http.StatusNotFound, "not_found", "no such route")
)

// auditRoutes registers the checkpoint (no token) and proof (admin) routes.
func (s *Server) auditRoutes(v1, adm *echo.Group) {
	v1.GET("/checkpoint", s.checkpoint)
	adm.GET("/proofs/inclusion", s.inclusionProof)
	adm.GET("/proofs/consistency", s.consistencyProof)
	adm.GET("/tasks/:id/provenance", s.provenance)
	adm.GET("/tasks/:id/audit-bundle", s.auditBundle)
}

// auditBundle: GET /admin/tasks/{id}/audit-bundle — the task's audit
// bundle (its events' envelopes, an inclusion proof for each against one
// signed checkpoint, the checkpoint and the key's verifier string), the
// same file `taskledger audit-bundle` writes; the client checks it with no
// trust in this server (`audit-verify`).
func (s *Server) auditBundle(c echo.Context) error {
	if s.tlog == nil {
		return errNoTransparency
	}
	if len(c.QueryParams()) > 0 {
		return invalid("this route takes no query parameter")
	}
	id := c.Param("id")
	if err := s.taskExists(id); err != nil {
		return err
	}
	b, err := s.tlog.Bundle(id)
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "application/json", b.Encode())
}

// proofParams reads the named positive integers; optional ones may be
// absent (0). Any other parameter, a repeated one, a leading zero, a sign
// or a zero is refused.
func proofParams(c echo.Context, required []string, optional ...string) (map[string]uint64, error) {
	q := c.QueryParams()
	out := map[string]uint64{}
	known := map[string]bool{}
	for _, k := range append(append([]string(nil), required...), optional...) {
		known[k] = true
	}
	for k, vs := range q {
		if !known[k] || len(vs) != 1 {
			return nil, errProofParam
		}
		v := vs[0]
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil || n == 0 || v[0] == '0' || v[0] == '+' {
			return nil, errProofParam
		}
		out[k] = n
	}
	for _, k := range required {
		if _, ok := out[k]; !ok {
			return nil, errProofParam
		}
	}
	return out, nil
}

// checkpoint: GET /api/v1/checkpoint[?size=S] — the latest signed
// checkpoint, or the one signed at size S, as the note text.
func (s *Server) checkpoint(c echo.Context) error {
	if s.tlog == nil {
		return errNoTransparency
	}
	p, err := proofParams(c, nil, "size")
	if err != nil {
		return err
	}
	var note []byte
	if size, ok := p["size"]; ok {
		note, err = s.tlog.BySize(size)
	} else {
		_, note, err = s.tlog.Latest()
	}
	if transparency.IsNotFound(err) {
		return errCheckpointNone
	}
	if err != nil {
		return err
	}
	c.Response().Header().Set("Cache-Control", "no-store")
	return c.Blob(http.StatusOK, "text/plain; charset=utf-8", note)
}

// InclusionProofJSON is the answer of GET /admin/proofs/inclusion.
type InclusionProofJSON struct {
	Seq        uint64   `json:"seq"`
	LeafIndex  uint64   `json:"leaf_index"`
	TreeSize   uint64   `json:"tree_size"`
	LeafHash   []byte   `json:"leaf_hash"`
	RootHash   []byte   `json:"root_hash"`
	Hashes     [][]byte `json:"hashes"`
	Checkpoint *string  `json:"checkpoint"` // the signed checkpoint of tree_size, when one was signed
}

// ConsistencyProofJSON is the answer of GET /admin/proofs/consistency.
type ConsistencyProofJSON struct {
	From           uint64   `json:"from"`
	To             uint64   `json:"to"`
	FromRoot       []byte   `json:"from_root"`
	ToRoot         []byte   `json:"to_root"`
	Hashes         [][]byte `json:"hashes"`
	FromCheckpoint *string  `json:"from_checkpoint"`
	ToCheckpoint   *string  `json:"to_checkpoint"`
}

func (s *Server) storedCheckpoint(size uint64) *string {
	if n, err := s.tlog.BySize(size); err == nil {
		str := string(n)
		return &str
	}
	return nil
}

func treeErr(err error) error {
	switch {
	case errors.Is(err, merkle.ErrSize):
		return errTreeSize
	case errors.Is(err, merkle.ErrIndex), errors.Is(err, merkle.ErrRange):
		return errProofRange
	}
	return err
}

// inclusionProof: GET /admin/proofs/inclusion?seq=N[&size=S] — the proof
// that the event of seq N is leaf N-1 of the tree of size S (default: the
// latest checkpoint's size).
func (s *Server) inclusionProof(c echo.Context) error {
	if s.tlog == nil {
		return errNoTransparency
	}
	p, err := proofParams(c, []string{"seq"}, "size")
	if err != nil {
		return err
	}
	size, ok := p["size"]
	if !ok {
		if size, _, err = s.tlog.Latest(); err != nil {
			return errCheckpointNone
		}
	}
	seq := p["seq"]
	tree, err := s.treeOf(size)
	if err != nil {
		return err
	}
	if seq > size {
		return errProofRange
	}
	hashes, err := tree.Inclusion(seq-1, size)
	if err != nil {
		return treeErr(err)
	}
	root, err := tree.Root(size)
	if err != nil {
		return treeErr(err)
	}
	leaf, err := tree.LeafHashAt(seq - 1)
	if err != nil {
		return treeErr(err)
	}
	if hashes == nil {
		hashes = [][]byte{}
	}
	return c.JSON(http.StatusOK, InclusionProofJSON{Seq: seq, LeafIndex: seq - 1, TreeSize: size, LeafHash: leaf,
		RootHash: root, Hashes: hashes, Checkpoint: s.storedCheckpoint(size)})
}

// treeOf returns the Merkle tree once it holds size leaves
// (transparency.Log.Reach: a tree a batch behind the log catches up
// first); a size beyond the log is errTreeSize.
func (s *Server) treeOf(size uint64) (*merkle.Tree, error) {
	if err := s.tlog.Reach(size); errors.Is(err, transparency.ErrBeyondLog) {
		return nil, errTreeSize
	} else if err != nil {
		return nil, err
	}
	return s.tlog.Tree(), nil
}

// consistencyProof: GET /admin/proofs/consistency?from=A&to=B — the proof
// that the tree of size B extends the tree of size A.
func (s *Server) consistencyProof(c echo.Context) error {
	if s.tlog == nil {
		return errNoTransparency
	}
	p, err := proofParams(c, []string{"from", "to"})
	if err != nil {
		return err
	}
	from, to := p["from"], p["to"]
	tree, err := s.treeOf(to)
	if err != nil {
		return err
	}
	if from > to {
		return errProofRange
	}
	hashes, err := tree.Consistency(from, to)
	if err != nil {
		return treeErr(err)
	}
	r1, err := tree.Root(from)
	if err != nil {
		return treeErr(err)
	}
	r2, err := tree.Root(to)
	if err != nil {
		return treeErr(err)
	}
	if hashes == nil {
		hashes = [][]byte{}
	}
	return c.JSON(http.StatusOK, ConsistencyProofJSON{From: from, To: to, FromRoot: r1, ToRoot: r2, Hashes: hashes,
		FromCheckpoint: s.storedCheckpoint(from), ToCheckpoint: s.storedCheckpoint(to)})
}
