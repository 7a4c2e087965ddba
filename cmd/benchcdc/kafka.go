package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

func topicsCmd(args []string) error {
	fs := flag.NewFlagSet("topics", flag.ContinueOnError)
	brokers := fs.String("brokers", "", "Kafka brokers, comma-separated")
	topics := fs.String("create", "", "topics to create (one partition, replication factor 1), comma-separated")
	appendTime := fs.Bool("log-append-time", true, "timestamp the records when the broker appends them (message.timestamp.type=LogAppendTime)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(*brokers, ",")...))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var configs map[string]*string
	if *appendTime {
		// The record's timestamp is then the moment it entered the log, not the producer's
		// send(), which precedes it by the producer's buffering (seconds under a backlog).
		t := "LogAppendTime"
		configs = map[string]*string{"message.timestamp.type": &t}
	}
	rs, err := kadm.NewClient(cl).CreateTopics(ctx, 1, 1, configs, strings.Split(*topics, ",")...)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, r := range rs.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("create topic %s: %w", r.Topic, r.Err)
		}
	}
	return nil
}

func cleanupCmd(args []string) error {
	fs := flag.NewFlagSet("cleanup", flag.ContinueOnError)
	pg := fs.String("pg", "", "PostgreSQL URL of a superuser (POSTGRES_URL)")
	db := fs.String("db", "", "the database to drop with its slots and publications")
	brokers := fs.String("brokers", "", "Kafka brokers, comma-separated")
	topics := fs.String("topics", "", "topics to delete, comma-separated")
	registry := fs.String("registry", "", "the registry's Confluent-compatible root (SCHEMA_REGISTRY_URL)")
	subjects := fs.String("subjects", "", "subjects to delete, comma-separated")
	groups := fs.String("groups", "", "consumer groups to delete, comma-separated")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if *db != "" {
		errs = append(errs, dropDatabase(ctx, *pg, *db))
	}
	if *topics != "" {
		errs = append(errs, deleteTopics(ctx, *brokers, strings.Split(*topics, ",")))
	}
	if *groups != "" {
		errs = append(errs, deleteGroups(ctx, *brokers, strings.Split(*groups, ",")))
	}
	if *subjects != "" {
		for _, s := range strings.Split(*subjects, ",") {
			// Soft delete, then hard delete (the Confluent API's two steps).
			for _, q := range []string{"", "?permanent=true"} {
				req, err := http.NewRequestWithContext(ctx, http.MethodDelete, *registry+"/subjects/"+url.PathEscape(s)+q, nil)
				if err == nil {
					var resp *http.Response
					if resp, err = http.DefaultClient.Do(req); err == nil {
						resp.Body.Close()
					}
				}
				if err != nil {
					errs = append(errs, fmt.Errorf("delete subject %s: %w", s, err))
				}
			}
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchcdc cleanup:", err)
	}
	return err
}

func deleteTopics(ctx context.Context, brokers string, topics []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	rs, err := kadm.NewClient(cl).DeleteTopics(ctx, topics...)
	if err != nil {
		return fmt.Errorf("delete topics: %w", err)
	}
	var errs []error
	for _, r := range rs.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			errs = append(errs, fmt.Errorf("delete topic %s: %w", r.Topic, r.Err))
		}
	}
	return errors.Join(errs...)
}

func deleteGroups(ctx context.Context, brokers string, groups []string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...))
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	rs, err := kadm.NewClient(cl).DeleteGroups(ctx, groups...)
	if err != nil {
		return fmt.Errorf("delete groups: %w", err)
	}
	var errs []error
	for _, r := range rs.Sorted() {
		if r.Err != nil && !errors.Is(r.Err, kerr.GroupIDNotFound) {
			errs = append(errs, fmt.Errorf("delete group %s: %w", r.Group, r.Err))
		}
	}
	return errors.Join(errs...)
}
