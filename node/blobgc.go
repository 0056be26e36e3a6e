package node

import (
	"fmt"

	"github.com/rs/zerolog"

	"taskledger/events"
	"taskledger/ledger"
	"taskledger/projections"
)

// collectBlobs removes at start what no committed event references in
// blobs/: the temporary files of uploads that never finished (a crash, a
// kill) and blobs renamed into place whose event was never committed. It
// logs how many it removed. A blob is referenced when the projections name
// it (a task's reference image or evidence) or when a
// task.reference_image_set event of an amended task named it (an image
// since replaced); only tasks amended at least once are read from the log,
// and only when some blob is not named by the projections.
func collectBlobs(store *ledger.Store, blobs *ledger.Blobs, st *projections.State, log zerolog.Logger) {
	var named, replaced map[string]bool
	referenced := func(sha string) (bool, error) {
		if named == nil { // only when blobs/ holds a file: most starts read no task
			named = namedBlobs(st)
		}
		if named[sha] {
			return true, nil
		}
		if settled, err := st.SettledNamesBlob(sha); err != nil || settled {
			return settled, err
		}
		if replaced == nil {
			var err error
			if replaced, err = replacedImages(store, st); err != nil {
				return false, err
			}
		}
		return replaced[sha], nil
	}
	c, err := blobs.Collect(referenced)
	if err != nil {
		log.Warn().Err(err).Int("temporary", c.Temporary).Int("unreferenced", c.Unreferenced).
			Msg("collecting orphaned blobs failed; the next start tries again")
		return
	}
	log.Info().Int("temporary", c.Temporary).Int("unreferenced", c.Unreferenced).Int64("bytes", c.Bytes).
		Msg("collected orphaned blobs")
}

// namedBlobs is every blob the projections name: reference images and
// evidence.
func namedBlobs(st *projections.State) map[string]bool {
	named := map[string]bool{}
	for _, t := range st.Tasks {
		if t.Image != nil {
			named[t.Image.SHA256] = true
		}
		for _, e := range t.Evidence {
			named[e.SHA256] = true
		}
	}
	return named
}

// replacedImages is every reference image an event of an amended task
// names.
func replacedImages(store *ledger.Store, st *projections.State) (map[string]bool, error) {
	out := map[string]bool{}
	// Settled tasks too (the read model's index of the amended ones: only
	// when a blob is named by nothing else).
	var amended []string
	if err := st.AmendedTasks(func(id string) error { amended = append(amended, id); return nil }); err != nil {
		return nil, err
	}
	for _, id := range amended {
		err := store.Stream(events.TaskStream(id), func(e *ledger.Event) error {
			if e.Type != events.EvTaskReferenceImageSet {
				return nil
			}
			body, err := events.DecodeBody(e.Type, e.Schema, e.Body)
			if err != nil {
				return fmt.Errorf("seq %d: %w", e.Seq, err)
			}
			if b, ok := body.(*events.TaskReferenceImageSet); ok {
				out[b.SHA256] = true
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("reading task %s for its reference images: %w", id, err)
		}
	}
	return out, nil
}
