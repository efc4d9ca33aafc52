package cli

import (
	"os"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rogpeppe/go-internal/txtar"
	"github.com/stretchr/testify/require"
)

// TestScripts runs the command-line scripts of testdata/script: each runs
// the real mailspool command (TestMain) in a fresh directory, on SQLite,
// and checks its output and exit status. They include the commands shown
// in README.md and docs/OPERATIONS.md, so that the docs are executed.
func TestScripts(t *testing.T) {
	testscript.Run(t, testscript.Params{
		Dir: "testdata/script",
		Setup: func(env *testscript.Env) error {
			env.Setenv("MAILSPOOL_DATABASE", "sqlite:"+env.WorkDir+"/mailspool.db")
			return nil
		},
	})
}

// TestOperationsEnqueueFileExampleIsTheScripts: the enqueue --file example
// of docs/OPERATIONS.md is the file testdata/script/enqueue_file.txtar
// queues, so the documented example is executed.
func TestOperationsEnqueueFileExampleIsTheScripts(t *testing.T) {
	doc, err := os.ReadFile("../docs/OPERATIONS.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(doc), "## Queueing mail from a file")
	require.True(t, ok)
	_, block, ok := strings.Cut(section, "```json\n")
	require.True(t, ok)
	block, _, ok = strings.Cut(block, "```")
	require.True(t, ok)
	ar, err := txtar.ParseFile("testdata/script/enqueue_file.txtar")
	require.NoError(t, err)
	for _, f := range ar.Files {
		if f.Name == "mails.json" {
			require.Equal(t, block, string(f.Data))
			return
		}
	}
	t.Fatal("enqueue_file.txtar has no mails.json")
}
