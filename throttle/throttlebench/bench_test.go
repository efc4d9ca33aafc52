package throttlebench

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/mailspool/mailspool/throttle"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	_ "modernc.org/sqlite"
)

// A short run of the scenario with goroutine workers; the full one, with
// worker processes and the numbers, is mailspool bench --throttle
// (docs/THROTTLING.md). The limits must hold here too; the rates are not
// asserted, the machine running the suite being as loaded as it is.
func TestShortScenario(t *testing.T) {
	r, err := Run(context.Background(), Options{
		DB:      "sqlite:" + filepath.Join(t.TempDir(), "b.db"),
		Workers: 2, Concurrency: 4, Messages: 25,
		Rate: throttle.Rate{N: 20, Per: time.Second, Burst: 1}, Limit: 2, Latency: 60 * time.Millisecond,
	})
	require.NoError(t, err)
	assert.LessOrEqual(t, r.MostInFlight, 2)
	assert.LessOrEqual(t, r.MostStartsPerSpan, 21)
	assert.Positive(t, r.LimitedRate)
	assert.Positive(t, r.OtherBaseline)
}

func TestMeasures(t *testing.T) {
	ms := func(a, b int64) Span { return Span{Domain: Limited, Start: a * 1e6, End: b * 1e6} }
	ss := []Span{ms(0, 100), ms(50, 150), ms(100, 200), ms(1000, 1100), ms(1099, 1200)}
	assert.Equal(t, 2, MostInFlight(ss), "an end and a start at one instant are not both in flight")
	assert.Equal(t, 3, MostStartsIn(ss, time.Second))
	assert.Equal(t, 4, MostStartsIn(ss, 1001*time.Millisecond))
	assert.InDelta(t, 4.0/1.099, rate(ss, Limited, time.Second), 1e-9)
}
