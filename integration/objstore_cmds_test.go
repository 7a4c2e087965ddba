package integration

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// TestTableCommandsObjectStores runs `ingestd table history|describe|alter|schema --table
// <uri>` on a table in each emulator, the store settings coming from the environment.
func TestTableCommandsObjectStores(t *testing.T) {
	for _, kind := range storeKinds {
		t.Run(kind, func(t *testing.T) {
			o := needStore(t, kind)
			uri := c38Table(t, o) // versions 0..6, 6 files, txn orders-setup = 6
			run := func(args ...string) string {
				t.Helper()
				cmd := exec.Command(ingestdBin(t), append([]string{"table"}, args...)...)
				var out, errb bytes.Buffer
				cmd.Stdout, cmd.Stderr = &out, &errb
				if err := cmd.Run(); err != nil {
					t.Fatalf("ingestd table %v: %v\n%s", args, err, errb.String())
				}
				return out.String()
			}
			var hist []struct {
				Version   int64  `json:"version"`
				Operation string `json:"operation"`
			}
			if err := json.Unmarshal([]byte(run("history", "--table", uri, "-n", "3", "--json")), &hist); err != nil {
				t.Fatal(err)
			}
			if len(hist) != 3 || hist[0].Version != 6 || hist[2].Version != 4 {
				t.Fatalf("history -n 3: %+v, want versions 6, 5, 4", hist)
			}
			var desc struct {
				Version  int64            `json:"version"`
				NumFiles int              `json:"numFiles"`
				Txns     map[string]int64 `json:"txnVersions"`
			}
			if err := json.Unmarshal([]byte(run("describe", "--table", uri, "--json")), &desc); err != nil {
				t.Fatal(err)
			}
			if desc.Version != 6 || desc.NumFiles != 6 || desc.Txns["orders-setup"] != 6 {
				t.Fatalf("describe: %+v, want version 6, 6 files, txn orders-setup 6", desc)
			}
			if out := run("alter", "--table", uri, "--add-column", "channel STRING"); !strings.Contains(out, "version 7: ADD COLUMNS") {
				t.Fatalf("alter: %q, want version 7: ADD COLUMNS", out)
			}
			if out := run("schema", "--table", uri); !strings.Contains(out, "channel") || !strings.Contains(out, "order_id") {
				t.Fatalf("schema after alter: %q", out)
			}
			if log := logVersions(t, uri); len(log) != 8 {
				t.Fatalf("log has %d versions after alter, want 8", len(log))
			}
		})
	}
}
