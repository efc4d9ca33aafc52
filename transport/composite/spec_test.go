package composite

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParse(t *testing.T) {
	sp, err := Parse("failover(smtp://u:pw@a.example:587?password_env=X, fake://?script=ok,550 ; probe=5s)")
	require.NoError(t, err)
	assert.Equal(t, Failover, sp.Policy)
	require.Len(t, sp.Members, 2)
	assert.Equal(t, "smtp://u:pw@a.example:587?password_env=X", sp.Members[0].URL)
	assert.Equal(t, "smtp://a.example:587", sp.Members[0].Name)
	assert.Equal(t, "fake://?script=ok,550", sp.Members[1].URL, "a comma inside a member URL stays in it")
	assert.Equal(t, 5*time.Second, sp.ProbeAfter)

	sp, err = Parse(" RoundRobin( fake://a?script=ok , fake://a?script=421; weights=3, 1 ) ")
	require.NoError(t, err)
	assert.Equal(t, RoundRobin, sp.Policy)
	assert.Equal(t, []Member{{Name: "fake://a", URL: "fake://a?script=ok", Weight: 3}, {Name: "fake://a#2", URL: "fake://a?script=421", Weight: 1}}, sp.Members)
	assert.Equal(t, DefaultProbeAfter, sp.ProbeAfter)
	assert.Equal(t, "roundrobin(fake://a?script=ok, fake://a?script=421; weights=3,1)", sp.String())

	assert.True(t, IsComposite("failover(fake://)"))
	assert.False(t, IsComposite("smtp://failover.example"))
}

func TestParseErrors(t *testing.T) {
	for in, want := range map[string]string{
		"smtp://a":                                     "is not failover(...) or roundrobin(...)",
		"random(fake://a, fake://b)":                   `unknown policy "random"`,
		"failover(fake://a, fake://b":                  "no closing parenthesis",
		"failover()":                                   "has no member",
		"failover(fake://a, , fake://b)":               "member 1 (\"fake://a,\") is not one transport URL",
		"failover(fake://a, b.example)":                "is not one transport URL",
		"failover(fake://a; weights=1)":                "failover(...) takes no weights",
		"roundrobin(fake://a, fake://b; weights=3)":    "gives 1 weights for 2 members",
		"roundrobin(fake://a, fake://b; weights=3,0)":  "weight \"0\" of member 2 (fake://b) is not a whole number from 1 to 1000",
		"roundrobin(fake://a, fake://b; weights=3,x)":  "weight \"x\" of member 2",
		"roundrobin(fake://a; wieghts=3)":              `unknown option "wieghts" (known: weights, probe)`,
		"failover(fake://a; probe=-1s)":                "probe",
		"failover(fake://a; probe=1s; probe=2s)":       "option probe given twice",
		"failover(fake://a, failover(fake://b))":       "is not one transport URL",
		"failover(smtp://u:s3cret@a.example, nothing)": "member 1 (\"smtp://xxxxx@a.example, nothing\")",
	} {
		_, err := Parse(in)
		if assert.Error(t, err, in) {
			assert.Contains(t, err.Error(), want, in)
			assert.NotContains(t, err.Error(), "s3cret", in)
		}
	}
}

// TestMemberNameHidesThePassword: a member's name is shown in errors, the
// health table, stats, logs and metric labels, so it must never hold any
// part of a password, including one that breaks the URL syntax with a
// "/", "#" or "?"; and the name of an ordinary member URL, the key of its
// health row, stays what it was.
func TestMemberNameHidesThePassword(t *testing.T) {
	for in, want := range map[string]string{
		"smtp://mailer:S3C/RET@127.0.0.1:25": "smtp://127.0.0.1:25",
		"smtp://mailer:S3C#RET@h.example":    "smtp://h.example",
		"smtp://mailer:S3C?RET@h.example":    "smtp://h.example",
		"smtp://mailer:12#34@h.example:587":  "smtp://h.example:587",
		"smtps://:S3C/R#E?T@h.example":       "smtps://h.example",
		// Ordinary URLs keep their names as written.
		"smtp://u:pw@a.example:587?password_env=X": "smtp://a.example:587",
		"SMTP://U:P@Mail.Example.COM:587":          "smtp://Mail.Example.COM:587",
		"smtp://u:p%40ss@b":                        "smtp://b",
		"smtp://mailer@h":                          "smtp://h",
		"smtp://u:pw@bücher.example:25":            "smtp://bücher.example:25",
		"smtp://b%C3%BCcher.example":               "smtp://b%C3%BCcher.example",
		"smtp://u:p@[::1]:25":                      "smtp://[::1]:25",
		"smtp://127.0.0.1:2525?tls=none#x":         "smtp://127.0.0.1:2525",
		"sendgrid://apikey:SG.x@eu?timeout=5s":     "sendgrid://eu",
		"ses://AKIA:sec@default?region=eu-west-1":  "ses://default",
		"fake://?script=ok,550":                    "fake://",
		"fake://a/":                                "fake://a",
	} {
		sp, err := Parse("roundrobin(" + in + ", fake://other; weights=1,1)")
		require.NoError(t, err, in)
		assert.Equal(t, want, sp.Members[0].Name, in)

		_, err = Parse("roundrobin(" + in + ", fake://other; weights=0,1)")
		require.Error(t, err, in)
		assert.Contains(t, err.Error(), "of member 1 ("+want+")", in)
		for _, secret := range []string{"S3C", "RET", ":12", "34"} {
			assert.NotContains(t, err.Error(), secret, in)
		}
	}
}
