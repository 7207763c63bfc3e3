#!/bin/sh
# Slim the image's virtualenv in the Dockerfile's build stage, after pip installed the runtime lock
# (--no-compile) and before the final stage copies it (docs/performance.md, "Image").
#
#   sh deploy/slim-venv.sh /opt/venv
#
# Removes what no import reaches: the packages' own test suites, type stubs (*.pyi), the sources and headers
# compiled extensions were built from (Cython's .pyx/.pxd/.pxi, C and C++), protobuf's .proto sources (the
# generated *_pb2 modules carry their descriptors), each distribution's RECORD (pip's list of installed files, for
# uninstalling; pip is not in the image, and the list no longer matches once the sources are removed), boto3's
# resource models (only boto3.resource() reads them; Bedrock and the credential chain use clients), and the AWS
# service models that neither the credential chain nor Bedrock load (botocore keeps sts, sso, sso-oidc, signin,
# bedrock and bedrock-runtime, and every file at the top of botocore/data: endpoints, partitions, retry and
# default configuration). Each distribution's METADATA, entry points, licences and SBOMs stay. Strips the debug
# symbols from the shared libraries (`strip --strip-unneeded`, binutils is in the build stage only), then
# compiles every module once, so that a read-only container never compiles one, and keeps only the bytecode.
set -eu

venv="${1:?usage: slim-venv.sh VENV}"
site="$(echo "$venv"/lib/python3*/site-packages)"
[ -d "$site" ] || { echo "slim-venv: no site-packages under $venv" >&2; exit 1; }

find "$site" -depth -type d -name __pycache__ -exec rm -rf {} +
find "$site" -depth -type d \( -name tests -o -name test \) -exec rm -rf {} +
find "$site" -type f \( -name '*.pyi' -o -name '*.pyx' -o -name '*.pxd' -o -name '*.pxi' -o -name '*.c' -o -name '*.h' \
    -o -name '*.cc' -o -name '*.cpp' -o -name '*.proto' \) -delete
find "$site" -type f -path '*.dist-info/RECORD' -delete
[ ! -d "$site/boto3/data" ] || find "$site/boto3/data" -mindepth 1 -delete

data="$site/botocore/data"
if [ -d "$data" ]; then
    for service in "$data"/*/; do
        case "$(basename "$service")" in
            sts | sso | sso-oidc | signin | bedrock | bedrock-runtime) ;;
            *) rm -rf "$service" ;;
        esac
    done
fi

find "$site" -type f \( -name '*.so' -o -name '*.so.*' \) -exec strip --strip-unneeded {} +

# Each module's bytecode beside it (x.pyc for x.py), and no source: the dependencies are never edited in the
# image, and a traceback through them still names the file and line (the gateway's own source stays).
"$venv/bin/python" -m compileall -q -b -j 0 "$site"
find "$site" -type f -name '*.py' -delete
