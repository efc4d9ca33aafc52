package smtp

import (
	"bufio"
	"bytes"
)

// dataWriter writes a message as SMTP DATA to w: it writes exactly the
// bytes net/textproto's DotWriter writes for the same input (a dot doubled
// at the start of a line, a bare LF made CRLF, the terminator on Close;
// FuzzDataWriter holds it), but copies the runs between line ends whole
// where DotWriter goes a byte at a time, which made it an eighth of a
// worker's CPU through SMTP.
type dataWriter struct {
	w     *bufio.Writer
	state int
}

// The states of a dataWriter, as DotWriter's.
const (
	dataBegin     = iota // nothing written yet
	dataBeginLine        // at the start of a line
	dataCR               // just wrote a CR
	dataMiddle           // inside a line
)

func (d *dataWriter) Write(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		switch d.state {
		case dataBegin, dataBeginLine:
			d.state = dataMiddle
			if b[n] == '.' {
				if err := d.w.WriteByte('.'); err != nil {
					return n, err
				}
			}
			continue // b[n] itself is written as in the middle of a line
		case dataCR:
			d.state = dataMiddle
			if b[n] == '\n' {
				d.state = dataBeginLine
			}
			if err := d.w.WriteByte(b[n]); err != nil {
				return n, err
			}
			n++
			continue
		}
		i := crOrLF(b[n:])
		if i < 0 {
			m, err := d.w.Write(b[n:])
			return n + m, err
		}
		if _, err := d.w.Write(b[n : n+i]); err != nil {
			return n, err
		}
		n += i
		end := "\r"
		if b[n] == '\n' {
			end, d.state = "\r\n", dataBeginLine
		} else {
			d.state = dataCR
		}
		if _, err := d.w.WriteString(end); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Close ends the data as DotWriter does: it ends an unfinished line, writes
// the terminator and flushes.
func (d *dataWriter) Close() error {
	var end string
	switch d.state {
	case dataBeginLine:
		end = ".\r\n"
	case dataCR:
		end = "\n.\r\n"
	default:
		end = "\r\n.\r\n"
	}
	if _, err := d.w.WriteString(end); err != nil {
		return err
	}
	return d.w.Flush()
}

// crOrLF returns the index of the first CR or LF in b, or -1.
func crOrLF(b []byte) int {
	i := bytes.IndexByte(b, '\r')
	if i < 0 {
		return bytes.IndexByte(b, '\n')
	}
	if j := bytes.IndexByte(b[:i], '\n'); j >= 0 {
		return j
	}
	return i
}
