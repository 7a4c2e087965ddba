package main

import (
	"fmt"
	"io"

	"github.com/ingestd/ingestd/ingest/config"
	"github.com/ingestd/ingestd/ingest/kafkaclient"
)

// printACLs writes, for each pipeline, the kafka-acls.sh lines of every Kafka ACL its
// commands need (kafkaclient.ACLs), grouped by command, and the registry requests they
// make, as a shell script with comments (docs/security.md, "ACLs and registry
// permissions").
func printACLs(w io.Writer, cfgs []*config.Config) {
	for i, c := range cfgs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "# pipeline %s (%s)\n", c.Name, c.File)
		last := ""
		for _, a := range kafkaclient.ACLs(c) {
			if a.Command != last {
				if a.Command == "log cleanup" {
					fmt.Fprintln(w, "# log cleanup (inside ingestd run and replay)")
				} else {
					fmt.Fprintf(w, "# ingestd %s\n", a.Command)
				}
				last = a.Command
			}
			line := a.Line(c.Kafka)
			if a.Note != "" {
				line += "   # " + a.Note
			}
			fmt.Fprintln(w, line)
		}
		fmt.Fprintln(w, "# schema registry (read-only; run, replay and dlq inspect):")
		for _, p := range kafkaclient.RegistryPermissions(c) {
			fmt.Fprintln(w, "#   "+p)
		}
	}
}
