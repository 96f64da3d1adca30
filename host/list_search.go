package host

import (
	"encoding/json"

	"github.com/ahpd/ahpd/protocol"
)

// maxSearch bounds listSessions' search, in bytes.
const maxSearch = 1024

// searchFilter reads listSessions' search: _meta {"ahpd.search": "words"}
// keeps the rows holding every word in their title, folders, branch or
// agent (listing.Search), before paging.
func searchFilter(meta protocol.Object) (string, error) {
	v, ok := meta["ahpd.search"]
	if !ok {
		return "", nil
	}
	var q string
	if err := json.Unmarshal(v, &q); err != nil || len(q) > maxSearch {
		return "", protocol.Errorf(protocol.CodeInvalidParams, `invalid params for listSessions: _meta["ahpd.search"]: a string of at most %d bytes`, maxSearch)
	}
	return q, nil
}
