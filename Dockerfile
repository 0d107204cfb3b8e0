# One image for every processor and the tg-* CLI (docker-compose.yml runs one container per
# processor from it).  Build: docker build -t trustgraph-explain .
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
# The packaging metadata first, then the code: the dependency layer is rebuilt only when it changes.
COPY pyproject.toml README.md ./
COPY trustgraph_base ./trustgraph_base
COPY trustgraph_flow ./trustgraph_flow
COPY trustgraph_cli ./trustgraph_cli
# pip compiles the bytecode at install time, so every container starts without compiling.
RUN pip install . && rm -rf /src/build

# Processors need no privileges; embedded CLI data (TG_HOME) goes to the user's home.  USER is the
# numeric id: a name may not resolve on the host that runs the container (hadolint DL3066).
RUN useradd --create-home --uid 10001 trustgraph
USER 10001
WORKDIR /home/trustgraph
ENV TG_HOME=/home/trustgraph/.trustgraph

# Services are chosen by command (e.g. "graph-rag"); without one, list the tg-* commands.
CMD ["sh", "-c", "ls /usr/local/bin | grep -E '^tg-'"]
