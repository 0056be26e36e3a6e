package node

import (
	"time"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
)

// Blob collection on a cluster: the sequencer alone removes from the
// cluster's object store (and from its own copy in DATA/blobs) the blobs
// no committed event names, at each promotion and then every
// BlobCollectEvery. A blob stored less than BlobGrace ago is always
// spared: it may be named by an event another node (a deposed sequencer,
// an upload forwarded a moment ago) is about to append; a re-used blob is
// stored again once older than jetstream.BlobRefresh, so its time is
// recent whenever an event naming it may still commit (D383).

// Cluster blob collection defaults.
const (
	DefaultBlobGrace        = time.Hour
	DefaultBlobCollectEvery = time.Hour
)

// BlobsCollected is one round's outcome on a cluster.
type BlobsCollected struct {
	Removed, Kept, Young int // unnamed and removed; named; unnamed but younger than the grace
}

func (c *clusterLink) kickBlobGC() {
	select {
	case c.gcKick <- struct{}{}:
	default:
	}
}

func (c *clusterLink) blobGCLoop(local *ledger.Blobs, every, grace time.Duration, done func(BlobsCollected, error)) {
	defer c.wg.Done()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		case <-c.gcKick:
		}
		if !c.sequencing() {
			continue
		}
		res, err := c.collectBlobs(local, grace)
		if err != nil {
			c.logger.Warn().Err(err).Msg("collecting unreferenced blobs failed; the next round tries again")
		} else if res.Removed > 0 {
			c.logger.Info().Int("removed", res.Removed).Int("young", res.Young).Msg("collected unreferenced blobs")
		}
		if done != nil {
			done(res, err)
		}
	}
}

// collectBlobs runs one round on the sequencer. The object store is
// listed first, the committed state read after: every event a listed blob
// may be named by is either in that state, or appended later by a node
// that stored (or re-stored) the blob less than grace ago.
func (c *clusterLink) collectBlobs(local *ledger.Blobs, grace time.Duration) (BlobsCollected, error) {
	c.gcMu.Lock()
	defer c.gcMu.Unlock()
	var res BlobsCollected
	if !c.sequencing() {
		return res, ErrNotSequencer
	}
	list, err := c.blobs.List()
	if err != nil {
		return res, err
	}
	var named map[string]bool
	var amended []string
	c.eng.Read(func(st *projections.State) {
		named = namedBlobs(st)
		for id, t := range st.Tasks {
			if t.Revision > 1 {
				amended = append(amended, id)
			}
		}
	})
	replaced, err := imagesOf(c.log, amended)
	if err != nil {
		return res, err
	}
	isNamed := func(sha string) bool { return named[sha] || replaced[sha] }
	now := c.clock.Now()
	for _, b := range list {
		switch {
		case isNamed(b.Name):
			res.Kept++
		case now.Sub(b.Stored) < grace || local.Pinned(b.Name):
			res.Young++
		case !c.sequencing():
			return res, ErrNotSequencer
		default:
			if err := c.blobs.Delete(b.Name); err != nil {
				return res, err
			}
			res.Removed++
		}
	}
	// This node's copy: an unnamed file not pinned by an upload in flight
	// here (Collect skips pinned names) goes too.
	if _, err := local.Collect(func(sha string) (bool, error) { return isNamed(sha), nil }); err != nil {
		return res, err
	}
	return res, nil
}

// imagesOf is every reference image an event of the given tasks names.
func imagesOf(log ledger.Backend, tasks []string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, id := range tasks {
		err := log.Stream(events.TaskStream(id), func(e *ledger.Event) error {
			if e.Type != events.EvTaskReferenceImageSet {
				return nil
			}
			body, err := events.DecodeBody(e.Type, e.Schema, e.Body)
			if err != nil {
				return err
			}
			if b, ok := body.(*events.TaskReferenceImageSet); ok {
				out[b.SHA256] = true
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
