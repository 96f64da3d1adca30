package host

import (
	"encoding/json"

	"github.com/ahpd/ahpd/host/listing"
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

// sorting reads listSessions' order: _meta {"ahpd.order": "activity",
// "created" or "title"} and {"ahpd.group": "repo"}, the host sorting and
// grouping every row before paging (listing.Sorting).
func sorting(meta protocol.Object) (listing.Sorting, error) {
	var order, group string
	for key, into := range map[string]*string{"ahpd.order": &order, "ahpd.group": &group} {
		if v, ok := meta[key]; ok {
			if err := json.Unmarshal(v, into); err != nil {
				return listing.Sorting{}, protocol.Errorf(protocol.CodeInvalidParams, `invalid params for listSessions: _meta[%q]: a string`, key)
			}
		}
	}
	s, err := listing.ParseSorting(order, group)
	if err != nil {
		return s, protocol.Errorf(protocol.CodeInvalidParams, `invalid params for listSessions: _meta: %v`, err)
	}
	return s, nil
}
