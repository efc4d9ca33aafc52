package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxExposure is the highest "systemd-analyze security" exposure a unit
// may have (0 is the safest, 10 the least safe).
const maxExposure = 2.5

// systemdAnalyze returns the path of systemd-analyze. Outside CI a machine
// without it skips the test, saying what to install; under CI=true that
// fails it.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("systemd-analyze")
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("systemd-analyze is required under CI=true: apt-get install systemd (%v)", err)
	}
	t.Skipf("systemd-analyze not found (%v); install it with: apt-get install systemd", err)
	return ""
}

// unitCopy writes unit, read from this directory, into dir as name, with
// its ExecStart binary replaced by one that exists here (verify checks
// that the program is there and executable).
func unitCopy(t *testing.T, dir, unit, name string) string {
	t.Helper()
	b, err := os.ReadFile(unit)
	require.NoError(t, err)
	exe, err := os.Executable()
	require.NoError(t, err)
	text := strings.ReplaceAll(string(b), "ExecStart=/usr/local/bin/mailspool ", "ExecStart="+exe+" ")
	require.NotEqual(t, string(b), text, "%s: ExecStart runs /usr/local/bin/mailspool", unit)
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

var exposure = regexp.MustCompile(`Overall exposure level for \S+: ([0-9.]+)`)

// TestUnitsVerifyAndStayHardened runs "systemd-analyze verify" (no
// warning at all) and "systemd-analyze security --offline" (exposure at
// most maxExposure) on both units, the template through an instance.
func TestUnitsVerifyAndStayHardened(t *testing.T) {
	sa := systemdAnalyze(t)
	for _, c := range []struct{ unit, instance string }{
		{"mailspool-worker.service", "mailspool-worker.service"},
		{"mailspool-worker@.service", "mailspool-worker@transactional.service"},
	} {
		t.Run(c.unit, func(t *testing.T) {
			dir := t.TempDir()
			unitCopy(t, dir, c.unit, c.unit)
			inst := unitCopy(t, dir, c.unit, c.instance)

			out, err := exec.Command(sa, "verify", inst).CombinedOutput()
			require.NoError(t, err, "systemd-analyze verify %s:\n%s", c.unit, out)
			require.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify %s warns", c.unit)

			out, err = exec.Command(sa, "security", "--offline=true", "--no-pager", inst).CombinedOutput()
			require.NoError(t, err, "systemd-analyze security %s:\n%s", c.unit, out)
			m := exposure.FindSubmatch(out)
			require.NotNil(t, m, "no exposure level in:\n%s", out)
			level, err := strconv.ParseFloat(string(m[1]), 64)
			require.NoError(t, err)
			t.Logf("%s: exposure %.1f", c.unit, level)
			require.LessOrEqual(t, level, maxExposure, "systemd-analyze security %s:\n%s", c.unit, out)
		})
	}
}

// TestUnitsStartOnAFreshHost: no unit needs a user that nothing creates,
// and the per-lane template never binds the config's admin listener, which
// every instance would share.
func TestUnitsStartOnAFreshHost(t *testing.T) {
	for _, unit := range []string{"mailspool-worker.service", "mailspool-worker@.service"} {
		b, err := os.ReadFile(unit)
		require.NoError(t, err)
		text := string(b)
		require.Contains(t, text, "\nDynamicUser=yes\n", unit)
		require.Contains(t, text, "\nStateDirectory=mailspool\n", unit)
		require.Contains(t, text, "\nConfigurationDirectory=mailspool\n", unit)
		require.NotRegexp(t, `(?m)^(User|Group)=`, text, unit)
	}
	b, err := os.ReadFile("mailspool-worker@.service")
	require.NoError(t, err)
	text := string(b)
	require.Regexp(t, `(?m)^ExecStart=.* --lane %i --admin-listen \$\{ADMIN_LISTEN\}( |$)`, text)
	require.Regexp(t, `(?m)^Environment=ADMIN_LISTEN=off$`, text, "off unless the instance gives it an address")
	require.Less(t, strings.Index(text, "Environment=ADMIN_LISTEN=off"), strings.Index(text, "EnvironmentFile=-/etc/mailspool/lane-%i.env"))
}
