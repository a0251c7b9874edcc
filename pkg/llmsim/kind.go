package llmsim

import "strings"

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
