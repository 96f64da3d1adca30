package protocol

import "strings"

// Question is what an input request asks, for a person reading a list of
// events or a page: its message, else its questions' titles and messages,
// " / " between them.
func (r *ChatInputRequest) Question() string {
	if r.Message != nil && strings.TrimSpace(*r.Message) != "" {
		return *r.Message
	}
	var texts []string
	for _, q := range r.Questions {
		var title *string
		var msg string
		switch q := q.(type) {
		case *ChatInputTextQuestion:
			title, msg = q.Title, q.Message
		case *ChatInputSingleSelectQuestion:
			title, msg = q.Title, q.Message
		case *ChatInputMultiSelectQuestion:
			title, msg = q.Title, q.Message
		case *ChatInputBooleanQuestion:
			title, msg = q.Title, q.Message
		case *ChatInputNumberQuestion:
			title, msg = q.Title, q.Message
		}
		t := msg
		if title != nil {
			t = *title + " " + msg
		}
		if t = strings.TrimSpace(t); t != "" {
			texts = append(texts, t)
		}
	}
	return strings.Join(texts, " / ")
}
