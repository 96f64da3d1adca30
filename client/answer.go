package client

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ahpd/ahpd/protocol"
)

// Answers are what a person gave to an input request's questions, by
// question id, each as typed: a text, a number, yes or no, an option's
// number, id or label. A multi-select question takes several values (or
// one with commas).
type Answers map[string][]string

// Question is what every kind of question has, and its kind: "text",
// "number" ("integer" for whole numbers), "boolean", "single-select",
// "multi-select", or "" for one this version does not know.
type Question struct {
	ID, Title, Message string
	Required           bool
	Kind               string
	Options            []protocol.ChatInputOption // the select kinds'
	Freeform           bool                       // a select kind takes text that is no option
}

// QuestionOf reads q.
func QuestionOf(q protocol.ChatInputQuestion) Question {
	var out Question
	base := func(id string, title *string, message string, required *bool, kind string) {
		out.ID, out.Message, out.Kind = id, message, kind
		if title != nil {
			out.Title = *title
		}
		out.Required = required != nil && *required
	}
	switch q := q.(type) {
	case *protocol.ChatInputTextQuestion:
		base(q.ID, q.Title, q.Message, q.Required, "text")
	case *protocol.ChatInputNumberQuestion:
		kind := "number"
		if q.Kind == "integer" {
			kind = "integer"
		}
		base(q.ID, q.Title, q.Message, q.Required, kind)
	case *protocol.ChatInputBooleanQuestion:
		base(q.ID, q.Title, q.Message, q.Required, "boolean")
	case *protocol.ChatInputSingleSelectQuestion:
		base(q.ID, q.Title, q.Message, q.Required, "single-select")
		out.Options, out.Freeform = q.Options, q.AllowFreeformInput != nil && *q.AllowFreeformInput
	case *protocol.ChatInputMultiSelectQuestion:
		base(q.ID, q.Title, q.Message, q.Required, "multi-select")
		out.Options, out.Freeform = q.Options, q.AllowFreeformInput != nil && *q.AllowFreeformInput
	}
	return out
}

// AnswerError is an answer that does not fit its question.
type AnswerError struct {
	Question string // the question's id; "" for the request as a whole
	Message  string
}

func (e *AnswerError) Error() string { return e.Message }

func answerErr(q Question, format string, args ...any) *AnswerError {
	what := "the answer"
	if q.ID != "" {
		what = "the answer to " + protocol.Quote(q.ID)
	}
	return &AnswerError{Question: q.ID, Message: what + " " + fmt.Sprintf(format, args...)}
}

// Sole gives values as the answer to req's one question. A request of
// several questions needs them by id; one of none (a URL to visit, say)
// takes no value.
func Sole(req *protocol.ChatInputRequest, values ...string) (Answers, error) {
	switch len(req.Questions) {
	case 0:
		if len(values) > 0 && strings.TrimSpace(strings.Join(values, "")) != "" {
			return nil, &AnswerError{Message: "the request asks no question: accept or decline it, without an answer"}
		}
		return Answers{}, nil
	case 1:
		return Answers{QuestionOf(req.Questions[0]).ID: values}, nil
	}
	ids := make([]string, len(req.Questions))
	for i, q := range req.Questions {
		ids[i] = QuestionOf(q).ID
	}
	return nil, &AnswerError{Message: fmt.Sprintf("the request asks %d questions (%s): answer each by its id", len(ids), strings.Join(ids, ", "))}
}

// Accept builds the chat/inputCompleted that accepts req with given. A
// question given no answer is skipped, unless it is required; an answer
// to no question of req is refused.
func Accept(req *protocol.ChatInputRequest, given Answers) (*protocol.ChatInputCompletedAction, error) {
	for id := range given {
		if !slices.ContainsFunc(req.Questions, func(q protocol.ChatInputQuestion) bool { return QuestionOf(q).ID == id }) {
			return nil, &AnswerError{Question: id, Message: fmt.Sprintf("the request has no question %s", protocol.Quote(id))}
		}
	}
	answers := protocol.NewMap[protocol.ChatInputAnswer]()
	for _, pq := range req.Questions {
		a, err := Answer(pq, given[QuestionOf(pq).ID])
		if err != nil {
			return nil, err
		}
		answers.Set(QuestionOf(pq).ID, a)
	}
	act := &protocol.ChatInputCompletedAction{RequestID: req.ID, Response: protocol.ChatInputResponseKindAccept}
	if answers.Len() > 0 {
		act.Answers = answers
	}
	return act, nil
}

// Answer reads the answer to one question from what a person gave: a
// submitted answer, or a skipped one when they gave nothing and the
// question is not required.
func Answer(pq protocol.ChatInputQuestion, values []string) (protocol.ChatInputAnswer, error) {
	q := QuestionOf(pq)
	if q.Kind == "" {
		return nil, answerErr(q, "cannot be given here: the question is of a kind this ahpd does not know")
	}
	if blank(values) {
		if q.Required {
			return nil, answerErr(q, "is missing, and the question is required")
		}
		return &protocol.ChatInputSkipped{}, nil
	}
	v, err := value(q, pq, values)
	if err != nil {
		return nil, err
	}
	return &protocol.ChatInputAnswered{State: "submitted", Value: v}, nil
}

// Decline builds the chat/inputCompleted that declines req.
func Decline(req *protocol.ChatInputRequest) *protocol.ChatInputCompletedAction {
	return &protocol.ChatInputCompletedAction{RequestID: req.ID, Response: protocol.ChatInputResponseKindDecline}
}

func blank(values []string) bool {
	for _, v := range values {
		if strings.TrimSpace(v) != "" {
			return false
		}
	}
	return true
}

// value reads the answer to one question.
func value(q Question, pq protocol.ChatInputQuestion, values []string) (protocol.ChatInputAnswerValue, error) {
	if q.Kind != "multi-select" && len(values) > 1 {
		return nil, answerErr(q, "is %d values; the question takes one", len(values))
	}
	s := strings.TrimSpace(values[0])
	switch q.Kind {
	case "number", "integer":
		return number(q, pq.(*protocol.ChatInputNumberQuestion), s)
	case "boolean":
		switch strings.ToLower(s) {
		case "y", "yes", "true", "1":
			return &protocol.ChatInputBooleanAnswerValue{Value: true}, nil
		case "n", "no", "false", "0":
			return &protocol.ChatInputBooleanAnswerValue{Value: false}, nil
		}
		return nil, answerErr(q, "is %s: answer yes or no", protocol.Quote(s))
	case "single-select":
		id, ok := optionOf(q.Options, s)
		switch {
		case ok:
			return &protocol.ChatInputSelectedAnswerValue{Value: id}, nil
		case q.Freeform:
			return &protocol.ChatInputSelectedAnswerValue{FreeformValues: []string{s}}, nil
		}
		return nil, answerErr(q, "is %s, which is none of the options: %s", protocol.Quote(s), OptionList(q.Options))
	case "multi-select":
		return multi(q, pq.(*protocol.ChatInputMultiSelectQuestion), values)
	}
	text := values[0]
	if tq, ok := pq.(*protocol.ChatInputTextQuestion); ok {
		n := int64(utf8.RuneCountInString(text))
		if tq.Min != nil && n < *tq.Min {
			return nil, answerErr(q, "has %d characters; the question wants at least %d", n, *tq.Min)
		}
		if tq.Max != nil && n > *tq.Max {
			return nil, answerErr(q, "has %d characters; the question takes at most %d", n, *tq.Max)
		}
	}
	return &protocol.ChatInputTextAnswerValue{Value: text}, nil
}

func number(q Question, nq *protocol.ChatInputNumberQuestion, s string) (protocol.ChatInputAnswerValue, error) {
	n, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(n, 0) || math.IsNaN(n) {
		return nil, answerErr(q, "is %s, which is not a number", protocol.Quote(s))
	}
	if q.Kind == "integer" && n != math.Trunc(n) {
		return nil, answerErr(q, "is %s; the question wants a whole number", protocol.Quote(s))
	}
	if nq.Min != nil && n < *nq.Min {
		return nil, answerErr(q, "is %s; the question wants at least %g", protocol.Quote(s), *nq.Min)
	}
	if nq.Max != nil && n > *nq.Max {
		return nil, answerErr(q, "is %s; the question takes at most %g", protocol.Quote(s), *nq.Max)
	}
	return &protocol.ChatInputNumberAnswerValue{Value: n}, nil
}

func multi(q Question, mq *protocol.ChatInputMultiSelectQuestion, values []string) (protocol.ChatInputAnswerValue, error) {
	if len(values) == 1 {
		values = strings.Split(values[0], ",")
	}
	v := &protocol.ChatInputSelectedManyAnswerValue{Value: []string{}}
	for _, s := range values {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		id, ok := optionOf(q.Options, s)
		switch {
		case ok:
			v.Value = append(v.Value, id)
		case q.Freeform:
			v.FreeformValues = append(v.FreeformValues, s)
		default:
			return nil, answerErr(q, "has %s, which is none of the options: %s", protocol.Quote(s), OptionList(q.Options))
		}
	}
	n := int64(len(v.Value) + len(v.FreeformValues))
	if mq.Min != nil && n < *mq.Min {
		return nil, answerErr(q, "picks %d; the question wants at least %d", n, *mq.Min)
	}
	if mq.Max != nil && n > *mq.Max {
		return nil, answerErr(q, "picks %d; the question takes at most %d", n, *mq.Max)
	}
	return v, nil
}

// optionOf finds an option by its number (from 1), its id, or its label
// in any case.
func optionOf(opts []protocol.ChatInputOption, s string) (string, bool) {
	if n, err := strconv.Atoi(s); err == nil && n >= 1 && n <= len(opts) {
		return opts[n-1].ID, true
	}
	for _, o := range opts {
		if o.ID == s {
			return o.ID, true
		}
	}
	for _, o := range opts {
		if strings.EqualFold(o.Label, s) {
			return o.ID, true
		}
	}
	return "", false
}

// OptionList names the options as a person may pick them: "1 Yes, 2 No".
func OptionList(opts []protocol.ChatInputOption) string {
	labels := make([]string, len(opts))
	for i, o := range opts {
		labels[i] = fmt.Sprintf("%d %s", i+1, o.Label)
	}
	return strings.Join(labels, ", ")
}

// Confirm builds the chat/toolCallConfirmed that approves or denies a
// tool call waiting for approval in turn turnID, as a person at a client
// does (confirmed "user-action"; a denial's reason "denied"). option, when
// not "", is the id of one of the options the call offers, of the kind
// the decision is.
func Confirm(turnID string, tc *protocol.ToolCallPendingConfirmationState, approve bool, option string) (*protocol.ChatToolCallConfirmedAction, error) {
	act := &protocol.ChatToolCallConfirmedAction{TurnID: turnID, ToolCallID: tc.ToolCallID, Approved: approve}
	if approve {
		act.Confirmed = new(protocol.ToolCallConfirmationReasonUserAction)
	} else {
		act.Reason = new(protocol.ToolCallCancellationReasonDenied)
	}
	if option == "" {
		return act, nil
	}
	want := protocol.ConfirmationOptionKindDeny
	if approve {
		want = protocol.ConfirmationOptionKindApprove
	}
	var offered []string
	for _, o := range tc.Options {
		if o.Kind != want {
			continue
		}
		if o.ID == option || strings.EqualFold(o.Label, option) {
			act.SelectedOptionID = &o.ID
			return act, nil
		}
		offered = append(offered, fmt.Sprintf("%s (%s)", o.ID, o.Label))
	}
	if len(offered) == 0 {
		return nil, &AnswerError{Message: fmt.Sprintf("the tool call offers no option to %s with: leave the option out", decision(approve))}
	}
	return nil, &AnswerError{Message: fmt.Sprintf("the tool call offers no option %s to %s with; it offers %s", protocol.Quote(option), decision(approve), strings.Join(offered, ", "))}
}

func decision(approve bool) string {
	if approve {
		return "approve"
	}
	return "deny"
}
