package host

import (
	"encoding/json"
	"fmt"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/ahpd/ahpd/host/conn"
	"github.com/ahpd/ahpd/host/listing"
)

// listResult is listSessions' answer (protocol.ListSessionsResult on the
// wire) written from its rows' JSON, which each row encodes once
// (session.ListRow.JSON): a page of 500 unchanged rows costs their bytes'
// copy, not their encoding, and the connection sends it as it is
// (conn.Encoded).
type listResult struct {
	page listing.Result
	next *string
}

func (r *listResult) encode() (conn.Encoded, error) {
	n := 64
	for _, row := range r.page.Rows {
		n += len(row.JSON()) + 1
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	if r.next != nil {
		var err error
		b = append(b, `"nextCursor":`...)
		if b, err = jsontext.AppendQuote(b, *r.next); err != nil {
			return nil, fmt.Errorf("listSessions: the cursor: %w", err)
		}
		b = append(b, ',')
	}
	b = append(b, `"items":[`...)
	for i, row := range r.page.Rows {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, row.JSON()...)
	}
	b = append(b, ']')
	if r.page.Groups != nil {
		// The groups on the page, for a client to head them: ahpd's own.
		groups, err := json.Marshal(r.page.Groups)
		if err != nil {
			return nil, fmt.Errorf("listSessions: the groups: %w", err)
		}
		b = append(b, `,"_meta":{"ahpd.groups":`...)
		b = append(b, groups...)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}
