package main

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// aclGrant finds "--operation OP --topic|--group NAME" in a kafka-acls.sh line.
var aclGrant = regexp.MustCompile(`--operation (\w+) +--(topic|group) (\S+)`)

func grants(text string) []string {
	var out []string
	for _, m := range aclGrant.FindAllStringSubmatch(text, -1) {
		if g := m[1] + " " + m[2] + " " + m[3]; !slices.Contains(out, g) {
			out = append(out, g)
		}
	}
	slices.Sort(out)
	return out
}

// TestValidateACLsAgreesWithSecurityDoc: `ingestd validate --acls` prints, for the silver
// pipeline of configs/, the ACLs docs/security.md lists for it (the same operations on
// the same resources), as kafka-acls.sh lines grouped by command.
func TestValidateACLsAgreesWithSecurityDoc(t *testing.T) {
	code, stdout, stderr := ingestd(t, "validate", "--acls", "--config", "../../configs/orders-silver.yaml")
	if code != exitOK {
		t.Fatalf("validate --acls: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"# ingestd run\n", "# ingestd replay\n", "# ingestd dlq inspect\n", "# log cleanup (inside ingestd run and replay)\n",
		"kafka-acls.sh --bootstrap-server <broker> --add --allow-principal <principal> --operation DescribeConfigs --topic orders.dlq",
		"#   GET /schemas/ids/{id}"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("validate --acls lacks %q:\n%s", want, stdout)
		}
	}
	doc, err := os.ReadFile("../../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(doc), "P=\"--allow-principal User:ingestd\"")
	block, _, _ = strings.Cut(block, "```")
	got, want := grants(stdout), grants(block)
	if len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("validate --acls grants\n%v\ndocs/security.md grants\n%v", got, want)
	}
}
