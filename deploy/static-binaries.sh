#!/bin/sh
# deploy/static-binaries.sh OUT: builds every main package of every service
# module (a folder of services/ with a go.mod) into OUT/<folder>/, and the
# compose healthcheck into OUT/healthcheck: static (CGO_ENABLED=0),
# -trimpath, stripped. The Dockerfile's build stage runs it; so does make
# static-binaries (into bin/static/) for images built from binaries
# compiled on the host (BINARIES=prebuilt, what CI does). make run, make
# build and the tests' serviceproc build with the same CGO_ENABLED=0 and
# -trimpath, so that on one machine every one of them compiles each package
# once and only the links differ.
set -eu
cd "$(dirname "$0")/.."
out=${1:?usage: deploy/static-binaries.sh OUT}
mkdir -p "$out"
out=$(cd "$out" && pwd)
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -trimpath"
pkgs=
for dir in services/*/; do
	[ -f "$dir/go.mod" ] && pkgs="$pkgs ./$dir..."
done
rm -rf "$out/all"
mkdir -p "$out/all"
# One go build for every service, so that their packages compile side by
# side; each binary then moves to its service's folder.
# shellcheck disable=SC2086 # the package patterns are words
go build -ldflags='-s -w' -o "$out/all/" $pkgs
for dir in services/*/; do
	[ -f "$dir/go.mod" ] || continue
	svc=$(basename "$dir")
	rm -rf "${out:?}/$svc"
	mkdir -p "$out/$svc"
	for main in $(go list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' "./$dir..."); do
		mv "$out/all/${main##*/}" "$out/$svc/"
	done
done
rmdir "$out/all"
cd deploy/docker/healthcheck && GOWORK=off go build -ldflags='-s -w' -o "$out/healthcheck" .
