package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"taskledger/audit/checkpoint"
	"taskledger/node"
	"taskledger/projections"
)

// `taskledger verify --server URL [--key VERIFIER]`: the whole log read
// through a running server's API (GET /admin/log, the stored envelopes)
// and checked here, trusting the server for nothing but availability: the
// seqs, the hash chain, the canonical encoding, every invariant and every
// task's rules. With --key (the verifier string of `checkpoint-key
// export`), the server's newest signed checkpoint is also checked against
// the Merkle tree rebuilt here.

func verifyRemote(f *verifyFlags, stdout, stderr io.Writer) int {
	r, key, retention := &f.remote, &f.key, &f.retention
	c, err := r.client()
	if err != nil {
		return fail(stderr, "%v", err)
	}
	cv := node.NewChainVerifier(projections.Config{IdempotencyRetentionMs: retention.Milliseconds()})
	for after := uint64(0); ; {
		var page struct {
			Envelopes []struct {
				Seq      uint64 `json:"seq"`
				Envelope []byte `json:"envelope"`
			} `json:"envelopes"`
			NextAfter uint64 `json:"next_after"`
		}
		if err := c.getJSON("/admin/log?limit=1000&after="+strconv.FormatUint(after, 10), &page); err != nil {
			return fail(stderr, "%v", err)
		}
		if len(page.Envelopes) == 0 {
			break
		}
		for _, e := range page.Envelopes {
			if err := cv.Add(e.Seq, e.Envelope); err != nil {
				fmt.Fprintf(stderr, "taskledger: verify FAILED: %v\n", err)
				return 1
			}
		}
		after = cv.Head().Seq
	}
	checked := ""
	if *key != "" {
		size, err := checkRemoteCheckpoint(c, *key, cv)
		if err != nil {
			fmt.Fprintf(stderr, "taskledger: verify FAILED: %v\n", err)
			return 1
		}
		checked = fmt.Sprintf(", signed checkpoint of size %d matches", size)
	}
	fmt.Fprintf(stdout, "ok: %d events, head seq %d, verified here from %s%s\n", cv.Events(), cv.Head().Seq, c.base, checked)
	return 0
}

// checkRemoteCheckpoint checks the server's newest signed checkpoint: its
// signature under vkey, and its root against the tree of the events read.
func checkRemoteCheckpoint(c *client, vkey string, cv *node.ChainVerifier) (uint64, error) {
	req, err := http.NewRequest(http.MethodGet, c.base+"/api/v1/checkpoint", nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("server %s: %w", c.base, err)
	}
	defer resp.Body.Close()
	note, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		var doc struct{ Code string }
		_ = json.Unmarshal(note, &doc)
		return 0, fmt.Errorf("the server has no signed checkpoint (HTTP %d %s)", resp.StatusCode, doc.Code)
	}
	cp, err := checkpoint.Open(note, vkey)
	if err != nil {
		return 0, fmt.Errorf("the server's checkpoint: %w", err)
	}
	if cp.Size > cv.Events() {
		return 0, fmt.Errorf("the server's checkpoint covers %d events, the log it served has %d", cp.Size, cv.Events())
	}
	root, err := cv.Tree().Root(cp.Size)
	if err != nil {
		return 0, err
	}
	if !bytes.Equal(root, cp.Root) {
		return 0, fmt.Errorf("the server's checkpoint of size %d does not match the log it served", cp.Size)
	}
	return cp.Size, nil
}
