package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// logStats sums a local Delta table's log (PROTOCOL.md, "Delta Log Entries"): commits that
// add data files, the add actions, and the rows they carry (add.stats numRecords).
type logStats struct {
	Commits int   // versions with at least one add action
	Files   int   // add actions
	Rows    int64 // sum of numRecords over the adds
	next    int64 // the first version not read yet
}

// update reads the versions from s.next on until the first one missing. An add without
// numRecords in its stats is an error: the harness could not tell when the table is complete.
func (s *logStats) update(table string) error {
	for {
		name := filepath.Join(table, "_delta_log", fmt.Sprintf("%020d.json", s.next))
		f, err := os.Open(name)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read Delta log: %w", err)
		}
		adds := 0
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var a struct {
				Add *struct {
					Path  string `json:"path"`
					Stats string `json:"stats"`
				} `json:"add"`
			}
			if err := json.Unmarshal(sc.Bytes(), &a); err != nil {
				f.Close()
				return fmt.Errorf("parse Delta log %s: %w", name, err)
			}
			if a.Add == nil {
				continue
			}
			var st struct {
				NumRecords *int64 `json:"numRecords"`
			}
			if err := json.Unmarshal([]byte(a.Add.Stats), &st); err != nil || st.NumRecords == nil {
				f.Close()
				return fmt.Errorf("parse Delta log %s: add %s has no stats.numRecords", name, a.Add.Path)
			}
			adds++
			s.Rows += *st.NumRecords
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return fmt.Errorf("read Delta log %s: %w", name, err)
		}
		if adds > 0 {
			s.Commits++
			s.Files += adds
		}
		s.next++
	}
}
