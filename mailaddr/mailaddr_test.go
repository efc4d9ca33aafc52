package mailaddr

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The spellings that were each a new recipient, passed a 1/1h limit and
// were delivered to victim@example.com: each is refused or is one key.
func TestOneMailboxOneKey(t *testing.T) {
	for _, addr := range []string{
		"victim@example.com",
		"victim@EXAMPLE.com",
		"Victim@Example.COM",
		"victim@ｅｘａｍｐｌｅ.com",      // fullwidth letters
		"victim@ＥＸＡＭＰＬＥ．ｃｏｍ",      // fullwidth, fullwidth full stop
		"victim@example\u3002com", // ideographic full stop
		"victim@example\uFF61com", // halfwidth ideographic full stop
		"victim@example.com.",
	} {
		key, err := Key(addr)
		require.NoError(t, err, addr)
		assert.Equal(t, "victim@example.com", key, addr)
	}
	for _, addr := range []string{
		"victim@ex\u200Bample.com", // zero-width space
		"victim@ex\u00ADample.com", // soft hyphen
		"victim@\uFEFFexample.com", // byte-order mark
		"vic\u200Dtim@example.com", // zero-width joiner in the local part
		"victim@ex\u202Eample.com", // right-to-left override
		"\u2060victim@example.com", // word joiner
	} {
		_, err := Key(addr)
		require.ErrorIs(t, err, ErrInvalid, "%+q", addr)
		assert.Contains(t, err.Error(), "invisible format character", "%+q", addr)
		_, err = Normalize(addr)
		require.ErrorIs(t, err, ErrInvalid, "%+q", addr)
	}
}

func TestNormalizeKeepsTheLocalPart(t *testing.T) {
	for in, want := range map[string]string{
		"Ann.Smith@Example.COM":        "Ann.Smith@example.com",
		"ann@BÜCHER.example":           "ann@bücher.example",
		"ann@xn--bcher-kva.example":    "ann@bücher.example",
		"ann@XN--BCHER-KVA.EXAMPLE":    "ann@bücher.example",
		"ann@bu\u0308cher.example":     "ann@bücher.example", // NFC
		"Jörg@example.com":             "Jörg@example.com",
		"ann@[192.0.2.1]":              "ann@[192.0.2.1]",
		`"a b"@example.com`:            `"a b"@example.com`,
		"ann@straße.example":           "ann@straße.example", // IDNA 2008, not transitional
		"ann@sub.EXAMPLE.co.uk":        "ann@sub.example.co.uk",
		"ann@example\uFF0Ecom":         "ann@example.com",
		"ÅSA@EXAMPLE.com":              "ÅSA@example.com",
		"ann@\uFF10\uFF11.example.com": "ann@01.example.com",
	} {
		got, err := Normalize(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	k1, err := Key("ÅSA@EXAMPLE.com")
	require.NoError(t, err)
	k2, err := Key("åsa@example.com")
	require.NoError(t, err)
	assert.Equal(t, k1, k2, "the local part compares without case")
	k3, err := Key("ſam@example.com") // U+017F long s folds with s
	require.NoError(t, err)
	assert.Equal(t, "sam@example.com", k3)
}

func TestNormalizeRefuses(t *testing.T) {
	for addr, reason := range map[string]string{
		"ann@exa\u2488mple.com":            "not a valid internationalized domain name", // disallowed: ⒈
		"ann@xn--zz.example":               "not a valid internationalized domain name",
		"ann@example..com":                 "empty label",
		"ann@example\u3002\u3002com":       "empty label",
		"ann@" + strings.Repeat("a", 64):   "at most 63",
		"ann@-example.com":                 "not a valid internationalized domain name",
		"ann":                              "local@domain",
		"ann@":                             "local@domain",
		"ann@example.com\xff":              "UTF-8",
		"ann@" + strings.Repeat("ü", 60):   "at most 63",
		"ann@exa_mple.com":                 "not a valid internationalized domain name",
		"ann@ex\u0000ample.com":            "not a valid internationalized domain name",
		"ann@" + strings.Repeat("a.", 128): "at most 253",
	} {
		_, err := Normalize(addr)
		require.Error(t, err, "%+q", addr)
		assert.True(t, errors.Is(err, ErrInvalid), "%+q", addr)
		assert.Contains(t, err.Error(), reason, "%+q", addr)
	}
}

func TestFold(t *testing.T) {
	assert.Equal(t, "kks", Fold("K\u212AS"))
	assert.Equal(t, Fold("ΣΑΣ"), Fold("σας"))
	for _, pair := range [][2]string{{"ſubject", "SUBJECT"}, {"Straße", "STRAßE"}, {"ǅ", "ǆ"}} {
		assert.Equal(t, strings.EqualFold(pair[0], pair[1]), Fold(pair[0]) == Fold(pair[1]), pair)
	}
}

func FuzzKeyAgreesWithEqualFold(f *testing.F) {
	f.Add("Ann@Example.com", "ann@EXAMPLE.com")
	f.Add("ſ@example.com", "S@example.com")
	f.Fuzz(func(t *testing.T, a, b string) {
		ka, erra := Key(a)
		kb, errb := Key(b)
		if erra != nil || errb != nil {
			return
		}
		na, _ := Normalize(a)
		nb, _ := Normalize(b)
		if strings.EqualFold(na, nb) && ka != kb {
			t.Errorf("%q and %q are equal without case but keys %q and %q differ", na, nb, ka, kb)
		}
		if ka2, _ := Key(ka); ka2 != ka {
			t.Errorf("Key is not idempotent: %q → %q → %q", a, ka, ka2)
		}
	})
}
