package bench

import (
	"fmt"
	"slices"
	"strings"
)

// Spread is the median, least and greatest of one figure over the runs of
// a repeated benchmark.
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

// spreadOf returns the spread of vs (the zero Spread when vs is empty). The
// median of an even number of values is the mean of the middle two.
func spreadOf(vs []float64) Spread {
	if len(vs) == 0 {
		return Spread{}
	}
	s := slices.Clone(vs)
	slices.Sort(s)
	mid := len(s) / 2
	median := s[mid]
	if len(s)%2 == 0 {
		median = (s[mid-1] + s[mid]) / 2
	}
	return Spread{Median: median, Min: s[0], Max: s[len(s)-1]}
}

// Summary is what one algorithm did over the runs of a repeated benchmark
// (Options.Repeat): the spread of its main figures, and the totals of what
// must stay zero.
type Summary struct {
	Kind      string `json:"kind"` // always "summary", to tell it from a run's Result in a JSON stream
	Algorithm string `json:"algorithm"`
	Runs      int    `json:"runs"`

	DrainPerS        Spread `json:"drain_per_s"`
	EnqueuePerS      Spread `json:"enqueue_per_s"`
	P99ClaimMS       Spread `json:"p99_claim_ms"`
	PagesPerMail     Spread `json:"pages_per_mail"`
	DiskReadsPerMail Spread `json:"disk_reads_per_mail"`
	DBCPUPerMail     Spread `json:"db_cpu_us_per_mail"`
	// E2EP99MS is the spread of the runs' 99th percentile time from
	// commit to send (steady runs only, Options.Steady).
	E2EP99MS *Spread `json:"e2e_p99_ms,omitempty"`
	// VsClassic is this algorithm's drain divided by the classic
	// algorithm's in the same run, when both ran (Both) and this is not
	// the classic one.
	VsClassic *Spread `json:"vs_classic,omitempty"`

	Duplicates int `json:"duplicates"`
	Lost       int `json:"lost"`
	Unrecorded int `json:"unrecorded"`
	Deadlocks  int `json:"deadlocks"`
}

// Summarize gathers the results of Run by algorithm, in the order the
// algorithms first appear.
func Summarize(results []*Result) []*Summary {
	var out []*Summary
	classic := map[int]float64{} // run → the classic drain of that run
	for _, r := range results {
		if r.Algorithm == Classic {
			classic[r.Run] = r.DrainPerS
		}
	}
	for _, r := range results {
		if slices.ContainsFunc(out, func(s *Summary) bool { return s.Algorithm == r.Algorithm }) {
			continue
		}
		s := &Summary{Kind: "summary", Algorithm: r.Algorithm}
		var drain, enqueue, claim, pages, diskReads, dbCPU, ratio, e2e []float64
		for _, o := range results {
			if o.Algorithm != r.Algorithm {
				continue
			}
			s.Runs++
			drain = append(drain, o.DrainPerS)
			enqueue = append(enqueue, o.EnqueuePerS)
			claim = append(claim, o.P99ClaimMS)
			pages = append(pages, o.PagesPerMail)
			diskReads = append(diskReads, o.DiskReadsPerMail)
			dbCPU = append(dbCPU, o.DBCPUPerMailUS)
			if o.Steady {
				e2e = append(e2e, o.E2EP99MS)
			}
			if c, ok := classic[o.Run]; ok && o.Algorithm != Classic && c > 0 {
				ratio = append(ratio, o.DrainPerS/c)
			}
			s.Duplicates += o.Duplicates
			s.Lost += o.Lost
			s.Unrecorded += o.Unrecorded
			s.Deadlocks += o.Deadlocks
		}
		s.DrainPerS, s.EnqueuePerS, s.P99ClaimMS = spreadOf(drain), spreadOf(enqueue), spreadOf(claim)
		s.PagesPerMail, s.DiskReadsPerMail, s.DBCPUPerMail = spreadOf(pages), spreadOf(diskReads), spreadOf(dbCPU)
		if len(ratio) > 0 {
			v := spreadOf(ratio)
			s.VsClassic = &v
		}
		if len(e2e) > 0 {
			v := spreadOf(e2e)
			s.E2EP99MS = &v
		}
		out = append(out, s)
	}
	return out
}

// Line is the one-line form: "bench-summary algorithm=mailspool runs=5
// drain_per_s_median=... drain_per_s_min=... drain_per_s_max=... ...".
// Figures a store does not report (pages and server CPU on SQLite) are
// left out.
func (s *Summary) Line() string {
	fields := []string{"algorithm=" + s.Algorithm, fmt.Sprintf("runs=%d", s.Runs)}
	add := func(name string, v Spread, format string) {
		fields = append(fields,
			fmt.Sprintf("%s_median="+format, name, v.Median),
			fmt.Sprintf("%s_min="+format, name, v.Min),
			fmt.Sprintf("%s_max="+format, name, v.Max))
	}
	add("drain_per_s", s.DrainPerS, "%.0f")
	add("enqueue_per_s", s.EnqueuePerS, "%.0f")
	add("p99_claim_ms", s.P99ClaimMS, "%.2f")
	if s.PagesPerMail.Max > 0 {
		add("pages_per_mail", s.PagesPerMail, "%.1f")
		add("disk_reads_per_mail", s.DiskReadsPerMail, "%.2f")
	}
	if s.DBCPUPerMail.Max > 0 {
		add("db_cpu_us_per_mail", s.DBCPUPerMail, "%.0f")
	}
	if s.VsClassic != nil {
		add("vs_classic", *s.VsClassic, "%.1f")
	}
	if s.E2EP99MS != nil {
		add("e2e_p99_ms", *s.E2EP99MS, "%.2f")
	}
	fields = append(fields, fmt.Sprintf("duplicates=%d", s.Duplicates), fmt.Sprintf("lost=%d", s.Lost),
		fmt.Sprintf("unrecorded=%d", s.Unrecorded), fmt.Sprintf("deadlocks=%d", s.Deadlocks))
	return "bench-summary " + strings.Join(fields, " ")
}
