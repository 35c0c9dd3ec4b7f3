package engine

import (
	"time"

	"github.com/contextrouter/contextrouter/internal/sources"
)

// chunkVerdict is the chunk visibility rule's decision on one chunk.
type chunkVerdict uint8

const (
	// chunkKeep: the agent gets the chunk as it is.
	chunkKeep chunkVerdict = iota
	// chunkRedact: the agent gets a placeholder (Access.Floor is FloorRedact).
	chunkRedact
	// chunkDropPath: a denyPaths or sourceDenyPaths glob matches the chunk's path.
	chunkDropPath
	// chunkDropStale: older than its source's freshness.maxAge under staleAction: Drop.
	chunkDropStale
	// chunkDropSensitivity: above the agent's clearance under sensitivityAction: Drop.
	chunkDropSensitivity
)

// dropped reports whether the chunk never reaches the agent.
func (v chunkVerdict) dropped() bool { return v >= chunkDropPath }

// admission is the verdict on one chunk, with its age as the verdict found it.
type admission struct {
	verdict chunkVerdict
	// aged: the source sets freshness and the chunk's content time is known;
	// stale: it is older than maxAge. Both stay false for a path-denied chunk.
	aged, stale bool
}

// admitChunk is the chunk visibility rule (api.md §5 step 5, §3, §4.7),
// the one every ranker applies: a path rule first, then the source's
// freshness at the query's clock now, then the agent's sensitivity floor.
// st is the chunk's source. The order decides which Dropped counter a chunk
// hidden for two reasons lands in.
func admitChunk(st *sourceState, c *sources.Chunk, access *Access, now time.Time) admission {
	if access.PathDenied(st.name, c.Path) {
		return admission{verdict: chunkDropPath}
	}
	var a admission
	if st.fresh.maxAge > 0 {
		if t := ContentTime(c); !t.IsZero() {
			_, a.stale = Staleness(t, now, st.fresh.maxAge)
			a.aged = true
			if a.stale && st.fresh.drop {
				a.verdict = chunkDropStale
				return a
			}
		}
	}
	switch access.Floor(st.sensitivity) {
	case FloorRedact:
		a.verdict = chunkRedact
	case FloorDrop:
		a.verdict = chunkDropSensitivity
	}
	return a
}

// mayDrop reports whether admitChunk can drop a chunk of st for the agent;
// false lets a ranker skip asking it chunk by chunk. It must hold whenever
// admitChunk drops (TestAdmitChunk checks every case).
func mayDrop(st *sourceState, access *Access) bool {
	return access.hasPathDenies() || (st.fresh.drop && st.fresh.maxAge > 0) || access.Floor(st.sensitivity) == FloorDrop
}

// admitRow is admitChunk for the static chunk of index row row.
func (s *Snapshot) admitRow(row uint32, access *Access, now time.Time) admission {
	return admitChunk(s.byGroup[s.ix.Group(row)], &s.docs[row].chunk, access, now)
}

// admitCandidates keeps the candidates admitChunk lets through, redacting
// those it says to, and counts the others in d by reason.
func (s *Snapshot) admitCandidates(cands []candidate, access *Access, now time.Time, d *Dropped) []candidate {
	kept := cands[:0]
	for _, c := range cands {
		st := s.sources[c.chunk.Source]
		a := admitChunk(st, &c.chunk, access, now)
		switch a.verdict {
		case chunkDropPath:
			d.PathDenied++
			continue
		case chunkDropStale:
			d.Stale++
			continue
		case chunkDropSensitivity:
			d.Sensitivity++
			continue
		case chunkRedact:
			c.chunk.Content = RedactedContent(st.name, st.sensitivity)
			c.tokens = s.est.Count(c.chunk.Content)
			c.redacted = true
			c.doc = -1
			c.terms = []uint32{}
		}
		c.aged, c.stale = a.aged, a.stale
		kept = append(kept, c)
	}
	return kept
}
