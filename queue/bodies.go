package queue

import "strings"

// Where a mail's bodies and headers are stored.
//
// On MySQL/MariaDB they are columns of the mail's row (text_body,
// html_body, headers), like every other part of the mail.
//
// On SQLite (schema version 8) a mail enqueued since that version has them
// in a row of the lane's bodies table (<table>_bodies), written once at
// enqueue and deleted with the mail's row by Cleanup; its row names it by
// body_id and keeps those columns empty. SQLite rewrites all of a row when
// one column changes, so with the bodies inline every claim and every
// completion rewrote about 4 KB per mail. A row enqueued before version 8
// keeps its bodies inline, with body_id = 0.

// withBodies returns a SELECT list and FROM clause that read cols, then
// the mail's text body, HTML body and headers, from the lane table aliased
// t: cols are row columns, comma-separated, without the alias. It also
// returns a condition that is true when the row's bodies are missing from
// the bodies table (SQLite; "0" on MySQL), which only a hand-made change
// to that table can cause: such a row is never claimed (see pickSelect),
// so that a mail is never sent without its body.
func (q *Queue) withBodies(cols string) (selectFrom, missing string) {
	var qualified []string
	for _, c := range strings.Split(cols, ",") {
		qualified = append(qualified, "t."+strings.TrimSpace(c))
	}
	list := strings.Join(qualified, ", ")
	if !q.d.sqlite {
		return list + `, t.text_body, t.html_body, t.headers FROM ` + q.table + ` t`, "0"
	}
	return list + `, COALESCE(b.text_body, t.text_body), COALESCE(b.html_body, t.html_body), COALESCE(b.headers, t.headers)
  FROM ` + q.table + ` t LEFT JOIN ` + q.bodies + ` b ON b.id = t.body_id`, `(t.body_id <> 0 AND b.id IS NULL)`
}
