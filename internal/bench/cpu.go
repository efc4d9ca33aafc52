package bench

import (
	"context"
	"database/sql"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cpuClock reads the CPU time spent by this process and its waited-for
// children, and by the database server when it runs on this machine and
// says where its pid file is. On a machine shared with other work, CPU time
// per mail moves much less than mails per second.
type cpuClock struct {
	serverPID int // 0: unknown (remote server, SQLite)
}

type cpuReading struct{ self, server time.Duration }

func newCPUClock(ctx context.Context, db *sql.DB) cpuClock {
	if storeName(db) != "mysql" {
		return cpuClock{}
	}
	var pidFile string
	if err := db.QueryRowContext(ctx, "SELECT @@pid_file").Scan(&pidFile); err != nil {
		return cpuClock{}
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return cpuClock{}
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return cpuClock{}
	}
	if _, err := procCPU(pid); err != nil {
		return cpuClock{}
	}
	return cpuClock{serverPID: pid}
}

func (c cpuClock) read() cpuReading {
	var r cpuReading
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		if syscall.Getrusage(who, &ru) == nil {
			r.self += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		}
	}
	if c.serverPID != 0 {
		r.server, _ = procCPU(c.serverPID)
	}
	return r
}

// procCPU returns the user + system CPU time of process pid from /proc.
func procCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// Fields after the command (which may contain spaces) start at ')'.
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0, os.ErrInvalid
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks, nil
}
