# Sourced on a GPU machine that has torch and Triton but neither toolkit nor internet (a lent device):
#   source benchmarks/gpu_env.sh && PARTS="long long-eole" bash benchmarks/run_gpu.sh OUT
# installs the wheels carried in ./.whl (OpenNMT-py's: ../shared/device-kit/fetch-wheels.sh; Eole's: the list in
# docs/eole.md; pytest-xdist and execnet for run_gpu.sh's test workers; adasplash for its baseline) into
# /tmp/site, puts ./stubs (../shared/device-kit/stubs: spacy, which the toolkits import and the runs never use)
# on the path, and activates this package in every python3 the runs start (onmt_train, eole,
# their spawned workers) through a sitecustomize hook: the autoload .pth of a pip install is not read from
# PYTHONPATH folders.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    || return 1
mkdir -p /tmp/hook
PYTHONPATH=$PWD python3 -c "from onmt_entmax.autoload import HOOK_SOURCE; \
open('/tmp/hook/sitecustomize.py', 'w').write(HOOK_SOURCE)" || return 1
export PYTHONPATH=/tmp/hook:/tmp/site:$PWD:$PWD/stubs PATH=/tmp/site/bin:$PATH PYTHONUNBUFFERED=1
python3 -c "import onmt, onmt_entmax; print('gpu_env: OpenNMT-py', onmt.__version__, end='')
try:
    import eole
    print(', Eole', eole.__version__)
except ImportError:
    print(', no Eole')" || return 1
