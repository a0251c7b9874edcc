package dataset

// Limits on what a dataset may hold. Every file is checked against its
// limit before it is read into memory (os.Stat, then a bounded read), so a
// hostile or broken dataset costs an error naming the file and the limit,
// not the machine's memory: a document or question is repeated in every
// prompt of every candidate. Each is far above what the benchmarks need.
const (
	// MaxNameLength bounds instance ids, database names and document names.
	MaxNameLength = 128
	// MaxQuestionBytes bounds a question. Spider 2.0's longest are about
	// 2 KB.
	MaxQuestionBytes = 64 << 10
	// MaxKnowledgeBytes bounds the external knowledge sent with an online
	// question (quorum serve).
	MaxKnowledgeBytes = 64 << 10
	// MaxDocumentBytes bounds one external-knowledge document of
	// resource/documents/ (or a BIRD evidence). Spider 2.0's largest is
	// about 22 KB.
	MaxDocumentBytes = 1 << 20
	// MaxTaskLineBytes bounds one line of a Spider 2.0 task file; a longer
	// line is skipped without being held in memory. The longest real
	// lines are a few KB; a line over it could only carry an oversize
	// question anyway.
	MaxTaskLineBytes = 1 << 20
	// MaxTaskFileBytes bounds a Spider 1.0 / BIRD task file, a JSON array
	// read whole (BIRD's train.json is about 10 MB, Spider's about 25 MB).
	MaxTaskFileBytes = 256 << 20
	// MaxMetadataBytes bounds one DDL.csv or per-table JSON file; Spider
	// 2.0's largest are a few MB.
	MaxMetadataBytes = 32 << 20
	// MaxDescriptionBytes bounds one BIRD description CSV; BIRD's largest
	// is a few tens of KB.
	MaxDescriptionBytes = 16 << 20
	// MaxGoldSQLBytes bounds one gold SQL file.
	MaxGoldSQLBytes = 1 << 20
	// MaxGoldCSVBytes bounds one gold result CSV, and is the evaluator's
	// own default limit (eval.DefaultMaxBytes), so a file the loader
	// accepts is one quorum eval can read.
	MaxGoldCSVBytes = 64 << 20
)
