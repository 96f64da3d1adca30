package httpapi

// OpenStreams is how many event streams the principal who holds open,
// and a channel closed at the next change of any person's count.
func (a *API) OpenStreams(who string) (int, <-chan struct{}) { return a.streams.count(who) }
