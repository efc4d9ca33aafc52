package queue

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestJoinObserversCallsEachSetField(t *testing.T) {
	var got []string
	a := &Observer{ClaimFunc: func(e ClaimEvent) { got = append(got, "a claim "+e.Lane) }}
	b := &Observer{
		ClaimFunc:   func(e ClaimEvent) { got = append(got, "b claim "+e.Lane) },
		CleanupFunc: func(e CleanupEvent) { got = append(got, "b cleanup") },
	}
	o := JoinObservers(a, nil, b)
	o.ClaimFunc(ClaimEvent{Lane: "x"})
	o.CleanupFunc(CleanupEvent{})
	o.OutcomeFunc(OutcomeEvent{}) // nobody listens: no call, no panic
	assert.Equal(t, []string{"a claim x", "b claim x", "b cleanup"}, got)
}

func TestDomainOf(t *testing.T) {
	assert.Equal(t, "example.com", domainOf("Bob.Smith@EXAMPLE.com"))
	assert.Equal(t, "b.example", domainOf(`"a@b"@b.example`))
	assert.Equal(t, "", domainOf("nobody"))
}
