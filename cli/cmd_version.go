package cli

import (
	"context"
	"fmt"
	"runtime/debug"
)

// versionInfo is "mailspool version --json".
type versionInfo struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

func runVersion(_ context.Context, e *env, args []string) error {
	fs := newFlagSet(e, "version", "[--json]")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	v := buildVersion()
	if *asJSON {
		return writeJSON(e.stdout, v)
	}
	fmt.Fprintf(e.stdout, "mailspool %s", v.Version)
	if v.Revision != "" {
		fmt.Fprintf(e.stdout, " (revision %s", v.Revision)
		if v.Time != "" {
			fmt.Fprintf(e.stdout, ", %s", v.Time)
		}
		if v.Modified {
			fmt.Fprint(e.stdout, ", with local changes")
		}
		fmt.Fprint(e.stdout, ")")
	}
	fmt.Fprintf(e.stdout, " %s\n", v.Go)
	if v.Revision == "" && (v.Version == "(unknown)" || v.Version == "(devel)") {
		fmt.Fprintln(e.stdout, noVCS)
	}
	return nil
}

// noVCS says why a binary has neither a version nor a revision.
const noVCS = `this binary has no version or VCS information: it was built outside a git checkout
(or with -buildvcs=false, or by go run/go test); build it with "go build ./cmd/mailspool"
in a git checkout, or install a release with "go install github.com/mailspool/mailspool/cmd/mailspool@VERSION"`

// buildVersion reads the module version and VCS stamp from the build info:
// "go install ...@v1.2.0" gives the version, a build in a checkout the
// revision.
func buildVersion() versionInfo {
	v := versionInfo{Module: "github.com/mailspool/mailspool", Version: "(unknown)"}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return v
	}
	v.Go = bi.GoVersion
	if bi.Main.Path != "" {
		v.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		v.Version = bi.Main.Version
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}
