package llmsim

import (
	"strings"

	"github.com/quorumsql/quorum/pkg/llm"
)

// Kind is what a request asks for. llmsim recognises every kind quorum's
// agents send from phrases their prompts carry (the same phrases as the
// reference ReFoRCE prompts, so the real path and the simulated one send
// identical text).
type Kind string

// Request kinds.
const (
	KindFormat          Kind = "format"
	KindGenerate        Kind = "generate"
	KindRefine          Kind = "refine"
	KindReaskSQL        Kind = "reask_sql"
	KindExplore         Kind = "explore"
	KindExploreCorrect  Kind = "explore_correct"
	KindExploreFixOther Kind = "explore_fix_others"
	KindLink            Kind = "link"
	KindVote            Kind = "vote"
	KindSelfConsistency Kind = "self_consistency"
	KindCTERefine       Kind = "cte_refine"
	KindUnknown         Kind = "unknown"
)

// PExA request kinds (spec pexa-raise.md §4.2): the agent is named by a
// marker in the conversation's first user message, the phase by its tail.
const (
	KindPExAPlan              Kind = "pexa_plan"
	KindPExAPlanAfterProbes   Kind = "pexa_plan_after_probes"
	KindPExAPlanAfterProposal Kind = "pexa_plan_after_proposal"
	KindPExATestcase          Kind = "pexa_testcase"
	KindPExATestcaseFix       Kind = "pexa_testcase_fix"
	// KindPExAChooseFinal answers the generator's choose_final turn, asked
	// after a batch with several successful answering queries (agent D-P24).
	KindPExAChooseFinal        Kind = "pexa_choose_final"
	KindPExAPropose            Kind = "pexa_propose"
	KindPExAProposeNext        Kind = "pexa_propose_next"
	KindPExAProposeAfterVerify Kind = "pexa_propose_after_verify"
	KindPExAProposeFix         Kind = "pexa_propose_fix"
	KindPExAVerify             Kind = "pexa_verify"
	// The no-proposer ablation's Planner (Table 2 "w/o proposer"), which
	// runs and checks its own SQL: after its execute_sql (or a finish the
	// agent's guard refused), and after its semantic_verifier.
	KindPExAPlanAfterSQL    Kind = "pexa_plan_after_sql"
	KindPExAPlanAfterVerify Kind = "pexa_plan_after_verify"
)

// PExAKinds lists the PExA kinds, in the order of the spec's table.
func PExAKinds() []Kind {
	return []Kind{KindPExAPlan, KindPExAPlanAfterProbes, KindPExAPlanAfterProposal, KindPExATestcase, KindPExATestcaseFix,
		KindPExAChooseFinal, KindPExAPropose, KindPExAProposeNext, KindPExAProposeAfterVerify, KindPExAProposeFix, KindPExAVerify}
}

// PExANoProposerKinds lists the kinds only the no-proposer ablation's
// Planner asks for (the rest of its pass uses PExAKinds' planner and test
// case kinds).
func PExANoProposerKinds() []Kind {
	return []Kind{KindPExAPlanAfterSQL, KindPExAPlanAfterVerify}
}

// isPExA reports whether k is one of the PExA kinds.
func (k Kind) isPExA() bool { return strings.HasPrefix(string(k), "pexa_") }

// Marker phrases, by kind. The agents' prompts contain them; tests on both
// sides use these constants so a reworded prompt cannot silently turn into
// "unknown" here.
const (
	MarkerFormat          = "simplest possible answer format"
	MarkerGenerate        = "answer only one complete SQL"
	MarkerInputSQL        = "Input sql:"
	MarkerErrorInfo       = "The error information is"
	MarkerPreviousContext = "based on previous context"
	MarkerExplore         = "Write at most 10"
	MarkerCorrectedTo     = "is corrected to"
	MarkerCorrectOthers   = "Please correct other sqls"
	MarkerLink            = "table level schema linking"
	MarkerVote            = "Compare the candidate answers"
	MarkerSelfConsistency = "Please check the answer again by reviewing task"
	MarkerCTE             = "intermediate results of each CTE"
	MarkerReaskOne        = "Please output one SQL only"
	MarkerReaskFence      = "Please answer in ```sql"
	MarkerReaskThinking   = "Please generate only one SQL with thinking process"
)

// PExA markers: each opens the first user message of one PExA conversation
// (the paper's Figs. 3–6, word for word).
const (
	MarkerPExAPlan     = "You are an excellent SQL agent whose task is to manage complex SQL query writing"
	MarkerPExATestcase = "Your task is to generate as many diverse SQL queries as possible for the question below"
	MarkerPExAPropose  = "Your task is to generate a final SQL query for the given question. You are provided with a set of probes"
	MarkerPExAVerify   = "You are a semantic verifier."
)

// RAISE request kinds (spec pexa-raise.md §4.2): the agent's trajectory
// segments, the final generation and its retries, and the column
// post-process, each named by a marker in the first user message.
const (
	KindRAISEAgent   Kind = "raise_agent"
	KindRAISEFinal   Kind = "raise_final"
	KindRAISERefine  Kind = "raise_refine"
	KindRAISEColumns Kind = "raise_columns"
)

// RAISEKinds lists the RAISE kinds, in the order of the spec's table.
func RAISEKinds() []Kind {
	return []Kind{KindRAISEAgent, KindRAISEFinal, KindRAISERefine, KindRAISEColumns}
}

// isRAISE reports whether k is one of the RAISE kinds.
func (k Kind) isRAISE() bool { return strings.HasPrefix(string(k), "raise_") }

// RAISE markers (spec §2.8): the agent prompt shows the command syntax, the
// final-generation prompt opens with the first, the column prompt asks the
// second; a final prompt that lists failed attempts is a retry.
const (
	MarkerRAISEAgent    = "[RUN] command(arguments) [EXECUTE]"
	MarkerRAISEFinal    = "Below are the operations a data analyst executed"
	MarkerRAISEColumns  = "what columns should be selected to answer the question, and in what order"
	MarkerRAISEAttempts = "Previous attempts that did not work:"
)

// Classify names the kind of a request from its last user message (the
// whole history is re-sent on every call, so earlier turns say nothing about
// this one).
func Classify(lastUser string) Kind {
	has := func(s string) bool { return strings.Contains(lastUser, s) }
	switch {
	case has(MarkerLink):
		return KindLink
	case has(MarkerFormat):
		return KindFormat
	case has(MarkerExplore):
		return KindExplore
	case has(MarkerCorrectedTo) && has(MarkerCorrectOthers):
		return KindExploreFixOther
	case has(MarkerInputSQL) && has(MarkerPreviousContext):
		return KindExploreCorrect
	case has(MarkerReaskThinking):
		return KindExploreCorrect
	case has(MarkerCTE):
		return KindCTERefine
	case has(MarkerInputSQL) && has(MarkerErrorInfo):
		return KindRefine
	case has(MarkerSelfConsistency):
		return KindSelfConsistency
	case has(MarkerVote):
		return KindVote
	case has(MarkerReaskOne), has(MarkerReaskFence):
		return KindReaskSQL
	case has(MarkerGenerate):
		return KindGenerate
	}
	return KindUnknown
}

// ClassifyConversation names the kind of a request from its whole
// conversation. A PExA conversation is recognised by a marker in its first
// user message and its phase by its tail: the last message, and for a tool
// result the tool it answers (found through tool_call_id among the earlier
// assistant tool calls). Anything else is classified by its last user
// message, as Classify does.
func ClassifyConversation(msgs []llm.Message) Kind {
	first, last := -1, -1
	for i, m := range msgs {
		if m.Role == "user" {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return Classify("")
	}
	if k := raiseKind(msgs[first].Content); k != "" {
		return k
	}
	agent := pexaAgent(msgs[first].Content)
	if agent == "" {
		return Classify(msgs[last].Content)
	}
	c := newConvo(msgs, first)
	switch agent {
	case MarkerPExAVerify:
		return KindPExAVerify
	case MarkerPExAPlan:
		group := c.lastToolGroup()
		switch {
		case len(group) == 0:
			return KindPExAPlan
		case hasTool(group, toolProposeFinalSQL):
			return KindPExAPlanAfterProposal
		case hasTool(group, toolGenerateTestcase):
			return KindPExAPlanAfterProbes
		case hasTool(group, toolSemanticVerifier):
			// The no-proposer Planner's own tools.
			return KindPExAPlanAfterVerify
		case hasTool(group, toolExecuteSQL), hasSQLFinish(group):
			return KindPExAPlanAfterSQL
		case c.count(toolProposeFinalSQL) > 0:
			// finish answered with an error after a proposal.
			return KindPExAPlanAfterProposal
		}
		return KindPExAPlanAfterProbes
	case MarkerPExATestcase:
		if m, ok := c.tail(); ok && m.Role == "user" && strings.Contains(m.Content, MarkerPExAChooseFinal) {
			return KindPExAChooseFinal
		}
		if len(c.lastToolGroup()) > 0 {
			return KindPExATestcaseFix
		}
		return KindPExATestcase
	case MarkerPExAPropose:
		m, ok := c.tail()
		switch {
		case !ok:
			return KindPExAPropose
		case m.Role == "user":
			// The agent's guard feeds a failed final SQL back as a user
			// message; anything else re-asks for the answer.
			if isExecError(m.Content) {
				return KindPExAProposeFix
			}
			return KindPExAProposeNext
		case c.toolName(m) == toolSemanticVerifier:
			return KindPExAProposeAfterVerify
		case strings.HasPrefix(strings.TrimSpace(m.Content), "Success"):
			return KindPExAProposeNext
		}
		return KindPExAProposeFix
	}
	return Classify(msgs[last].Content)
}
