package host

import "context"

// AwaitCatalogue waits until the catalogue's first scan is published
// whole, for benchmarks that list after it: the first page is published
// first, the rest after (catalogue.Catalogue.FirstPage). It waits at most
// the bound every command naming an external session waits, and reports
// whether the host has a catalogue.
func (h *Host) AwaitCatalogue(ctx context.Context) bool { return h.ext.Await(ctx) }
