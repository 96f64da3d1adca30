package chats

import (
	"github.com/ahpd/ahpd/plugins"
	"github.com/ahpd/ahpd/protocol"
)

// AutoReplyAnswer is what a question is answered with when nobody is
// there to (Options.AutoReply): the agent is told to go on by its own
// judgement, in the words VS Code's own host uses.
const AutoReplyAnswer = "The user is not available to answer your question. Choose a pragmatic option best aligned with the context of the request."

// autoReply answers req for a person who is not there: each text question
// with AutoReplyAnswer, every other question skipped. A request with no
// question (a page to open, a sign-in) needs a person: ok is false.
func autoReply(req protocol.ChatInputRequest) (ans plugins.Answer, ok bool) {
	if len(req.Questions) == 0 {
		return plugins.Answer{}, false
	}
	answers := protocol.NewMap[protocol.ChatInputAnswer]()
	for _, q := range req.Questions {
		switch q := q.(type) {
		case *protocol.ChatInputTextQuestion:
			answers.Set(q.ID, &protocol.ChatInputAnswered{State: "submitted", Value: &protocol.ChatInputTextAnswerValue{Value: AutoReplyAnswer}})
		case *protocol.ChatInputSingleSelectQuestion:
			answers.Set(q.ID, &protocol.ChatInputSkipped{})
		case *protocol.ChatInputMultiSelectQuestion:
			answers.Set(q.ID, &protocol.ChatInputSkipped{})
		case *protocol.ChatInputBooleanQuestion:
			answers.Set(q.ID, &protocol.ChatInputSkipped{})
		case *protocol.ChatInputNumberQuestion:
			answers.Set(q.ID, &protocol.ChatInputSkipped{})
		default:
			return plugins.Answer{}, false
		}
	}
	return plugins.Answer{Response: protocol.ChatInputResponseKindAccept, Answers: answers}, true
}
