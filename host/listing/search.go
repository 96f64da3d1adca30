package listing

import (
	"strings"

	"github.com/ahpd/ahpd/host/session"
)

// Search returns what keeps the rows holding every word of q (case
// folded) in their title, working folders, branch or agent
// (session.ListRow.Words): a listing's search (listSessions'
// _meta["ahpd.search"]). It returns nil, keeping every row, when q has no
// words.
func Search(q string) func(*session.ListRow) bool {
	terms := strings.Fields(strings.ToLower(q))
	if len(terms) == 0 {
		return nil
	}
	return func(r *session.ListRow) bool {
		h := r.Words()
		for _, t := range terms {
			if !strings.Contains(h, t) {
				return false
			}
		}
		return true
	}
}
