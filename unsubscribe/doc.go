// Package unsubscribe is RFC 8058 one-click unsubscribe for bulk mail.
//
// A bulk lane (or a list named at enqueue, queue.List) gets, when its mail
// is stored, the headers
//
//	List-Unsubscribe: <https://mail.example.com/u/TOKEN>[, <mailto:...>]
//	List-Unsubscribe-Post: List-Unsubscribe=One-Click
//	List-Id: <LIST.example.com>
//
// (Lane builds the lane's queue.Screen on suppress.List.BulkScreen).
// Transactional lanes get none. The token names the recipient, the list
// and the mail, sealed with AES-256-GCM under a key with an id (Signer), so
// that the link reads as nothing to a proxy log or a link scanner, and keys
// rotate: the newest key seals, older ones open until the end of their
// grace period. Tokens of the first form (the claim in clear with its
// HMAC-SHA-256), in mail sent before, still verify.
//
// Handler serves /u/TOKEN on the public listener (mailspool serve):
//
//   - POST with List-Unsubscribe=One-Click, as
//     application/x-www-form-urlencoded or multipart/form-data, adds the
//     recipient to the suppression list in the scope of the list (reason
//     unsubscribe), and answers 200: no redirect, no cookie, and the same
//     answer the second time.
//   - GET and HEAD show a small page whose button makes that POST. They
//     never change anything: mail scanners and link previewers fetch
//     every link of a mail.
//   - A token that does not verify (altered, unknown key, key past its
//     grace) gets 404, after the same work whatever is wrong with it: the
//     tag or MAC is always checked, in constant time.
//
// A list's scope never blocks mail of another list or of a transactional
// lane: the suppression is in the list's scope, which only mail of that
// list checks (suppress.Lists).
package unsubscribe
