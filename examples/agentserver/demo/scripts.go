package demo

import "fmt"

// task is what one run is about: the parent's prompt and words, and one
// script per sub-agent.
type task struct {
	prompt, thought, intro string
	research, code         script
	testOutput, answer     string
}

// script is one sub-agent's turn.
type script struct {
	goal, thought string
	steps         []step
	summary       string
}

// step is some text, a tool call, or both (text first).
type step struct {
	say  string
	tool toolStep
}

// toolStep is one tool call; work is its duration in tokens' worth of time.
type toolStep struct {
	kind, title string
	input       map[string]any
	work        float64
	result      string
}

// search, read, edit and execute make the scripts' tool calls (ACP kinds);
// a call's title and input follow from its target.

// search is a search for pattern under path.
func search(pattern, path string, work float64, result string) toolStep {
	return toolStep{kind: "search", title: fmt.Sprintf("Search for %q in %s", pattern, path),
		input: map[string]any{"pattern": pattern, "path": path}, work: work, result: result}
}

// read is a read of the file at path.
func read(path string, work float64, result string) toolStep {
	return toolStep{kind: "read", title: "Read " + path, input: map[string]any{"path": path}, work: work, result: result}
}

// edit is an edit, titled title, of the file at path.
func edit(title, path string, work float64, result string) toolStep {
	return toolStep{kind: "edit", title: title, input: map[string]any{"path": path}, work: work, result: result}
}

// execute is a run of command, titled title.
func execute(title, command string, work float64, result string) toolStep {
	return toolStep{kind: "execute", title: title, input: map[string]any{"command": command}, work: work, result: result}
}

var tasks = []task{
	{
		prompt:  "Add a retry with exponential backoff to the webhook sender, and make sure we do not retry 4xx answers.",
		thought: "Two independent parts here: find out how the sender is wired today and what the existing retry helpers look like, then change the code. I can hand each to a sub-agent and verify at the end.",
		intro:   "I'll have a researcher map the webhook sender and the retry helpers we already have, while a coder prepares the change. Then I'll run the tests.",
		research: script{
			goal:    "Map the webhook sender and the existing retry helpers",
			thought: "Start with a search for the sender, then read it and look for a backoff helper that is already in the tree.",
			steps: []step{
				{tool: search("func Send", "internal/webhook", 12,
					"internal/webhook/sender.go:41: func (s *Sender) Send(ctx context.Context, ev Event) error")},
				{tool: read("internal/webhook/sender.go", 8,
					"Send posts once with a 10 s client timeout and returns the first error; no retry, status codes are not inspected.")},
				{say: "The sender posts exactly once. There is a backoff helper in internal/retry that the queue consumer already uses, so we should reuse it rather than write another. ",
					tool: read("internal/retry/backoff.go", 8,
						"retry.Do(ctx, policy, fn) with policy{Initial: 200ms, Max: 10s, Multiplier: 2, Jitter: 0.2}; fn returns retry.Permanent(err) to stop.")},
			},
			summary: "Sender posts once (sender.go:41). Reuse retry.Do from internal/retry; wrap 4xx answers in retry.Permanent so they stop at once.",
		},
		code: script{
			goal:    "Wrap Send in retry.Do and stop on 4xx",
			thought: "Wrap the HTTP call in retry.Do; classify the answer: 2xx ok, 4xx permanent, 5xx and network errors retried. Add a table test with a fake server.",
			steps: []step{
				{tool: read("internal/webhook/sender_test.go", 6,
					"One test: TestSendPostsJSON with httptest.NewServer.")},
				{say: "I'll wrap the post in retry.Do and mark client errors as permanent. ",
					tool: toolStep{kind: "edit", title: "Edit internal/webhook/sender.go", input: map[string]any{"path": "internal/webhook/sender.go", "summary": "retry.Do around post; 4xx → retry.Permanent"}, work: 18,
						result: "@@ func (s *Sender) Send\n-\treturn s.post(ctx, ev)\n+\treturn retry.Do(ctx, s.policy, func(ctx context.Context) error {\n+\t\treturn classify(s.post(ctx, ev))\n+\t})"}},
				{tool: edit("Add TestSendRetries to sender_test.go", "internal/webhook/sender_test.go", 14,
					"Added a table test: 503,503,200 → 3 posts; 400 → 1 post, error; network error → retried until ctx ends.")},
			},
			summary: "Send now retries 5xx and network errors with the shared backoff policy and stops at once on 4xx; three new test cases cover it.",
		},
		testOutput: "ok  \texample.com/app/internal/retry\t0.412s\nok  \texample.com/app/internal/webhook\t1.873s",
		answer:     "Done. Send now goes through retry.Do with the shared exponential backoff (200 ms doubling to 10 s, 20 % jitter). 4xx answers are permanent and return at once; 5xx and network errors are retried until the context ends. The new table test covers all three cases and the suite passes.",
	},
	{
		prompt:  "Why does the nightly export sometimes write an empty file? Fix it if you can.",
		thought: "An empty file usually means the writer was closed before a flush, or an error was swallowed. One sub-agent can read the logs and the code, another can try to reproduce it with a test.",
		intro:   "Let me split this: a researcher will go through the export code and last night's logs, and a coder will try to reproduce the empty file in a test.",
		research: script{
			goal:    "Find where the export can end with an empty file",
			thought: "Look at the last failing run's log first, then the code path that writes the file.",
			steps: []step{
				{tool: execute("grep export logs for errors", "grep -n 'export' /var/log/app/nightly.log | tail -20", 10,
					"02:00:03 export: started (rows=18231)\n02:00:41 export: context canceled\n02:00:41 export: wrote /data/export.csv (0 bytes)")},
				{say: "The run was cancelled mid-way and still reported success. ",
					tool: read("cmd/export/main.go", 10,
						"w := bufio.NewWriter(f); defer f.Close(); ... for rows.Next() { … }; return nil  // rows.Err() never checked, w never flushed on error")},
			},
			summary: "rows.Err() is never checked and the bufio.Writer is not flushed on the error path, so a cancelled query leaves a 0-byte file that looks like success.",
		},
		code: script{
			goal:    "Reproduce and fix the empty export",
			thought: "Write to a temp file and rename only after flush and rows.Err() succeed; a cancelled context must return an error.",
			steps: []step{
				{tool: edit("Add TestExportCancelled", "cmd/export/export_test.go", 12,
					"Test cancels the context after 100 rows and expects an error and no file at the destination.")},
				{tool: execute("go test ./cmd/export -run Cancelled", "go test ./cmd/export -run Cancelled", 16,
					"--- FAIL: TestExportCancelled\n    export_test.go:48: err = <nil>, want context.Canceled; /tmp/out.csv has 0 bytes")},
				{say: "Reproduced. Now the fix: write to a temp file, check rows.Err(), flush, and rename atomically. ",
					tool: edit("Edit cmd/export/main.go", "cmd/export/main.go", 18,
						"@@ func export\n+\tif err := rows.Err(); err != nil { return err }\n+\tif err := w.Flush(); err != nil { return err }\n+\treturn os.Rename(tmp.Name(), dst)")},
			},
			summary: "Reproduced with TestExportCancelled; the export now writes to a temp file and renames it only after rows.Err() and Flush succeed.",
		},
		testOutput: "ok  \texample.com/app/cmd/export\t0.921s\nok  \texample.com/app/internal/db\t0.307s",
		answer:     "Found it: when the query was cancelled at 02:00:41 the loop ended early, rows.Err() was never checked and the buffered writer was never flushed, so a 0-byte file was left behind and the job reported success. The export now writes to a temporary file and renames it into place only after rows.Err() and Flush succeed; a cancelled run now fails loudly. A regression test covers it.",
	},
}
