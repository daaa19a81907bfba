module github.com/parleyhq/parley/deploy/docker/healthcheck

go 1.26.0
