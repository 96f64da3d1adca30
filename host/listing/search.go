package listing

import (
	"encoding/json"
	"net/url"
	"strings"

	"github.com/ahpd/ahpd/protocol"
)

// Search returns what keeps the rows holding every word of q (case
// folded) in their title, working folders, branch or agent: a listing's
// search (listSessions' _meta["ahpd.search"]). It returns nil, keeping
// every row, when q has no words.
func Search(q string) func(*protocol.SessionSummary) bool {
	terms := strings.Fields(strings.ToLower(q))
	if len(terms) == 0 {
		return nil
	}
	return func(s *protocol.SessionSummary) bool {
		var hay strings.Builder
		hay.WriteString(s.Title)
		for _, w := range s.WorkingDirectories {
			hay.WriteByte(0)
			if u, err := url.Parse(w); err == nil && u.Scheme == "file" {
				w = u.Path
			}
			hay.WriteString(w)
		}
		if raw, ok := s.Meta["ahpd.branch"]; ok {
			var b string
			if json.Unmarshal(raw, &b) == nil {
				hay.WriteByte(0)
				hay.WriteString(b)
			}
		}
		hay.WriteByte(0)
		hay.WriteString(s.Provider)
		h := strings.ToLower(hay.String())
		for _, t := range terms {
			if !strings.Contains(h, t) {
				return false
			}
		}
		return true
	}
}
