# A fleet-wide conformance gate for Nomad dynamic host volume plugins.
#
# A `sysbatch` job runs once on every eligible client node. On each node it runs
# `dhv-conform check` against every executable in that node's real host volume
# plugin dir (the client's `host_volume_plugin_dir`, by default
# `<data_dir>/host_volume_plugins`), and writes one JSON report, one JUnit file,
# one Markdown summary and one log per plugin into the allocation's shared data
# dir, named `<node>.<plugin>.*` so the reports of every node can be collected
# into one directory without clashing. Each report records the node
# (`--node-name ${node.unique.name}`), the plugin's sha256 and version, and the
# harness version. The task exits 0 when every plugin on the node is conformant,
# so `nomad job status dhv-conformance` shows at a glance which nodes failed.
#
# Run it:
#
#   nomad job run examples/nomad/conformance.nomad.hcl
#   nomad job run -var 'plugin_dir=/srv/nomad/host_volume_plugins' examples/nomad/conformance.nomad.hcl
#
# Read the results of one node (the alloc ids are in `nomad job status dhv-conformance`):
#
#   nomad alloc logs <alloc-id> check                          # one verdict line per plugin
#   nomad alloc fs <alloc-id> alloc/data/dhv-conform/          # list the reports
#   nomad alloc fs <alloc-id> alloc/data/dhv-conform/<node>.<plugin>.md   # the summary table
#
# Collect every node's JSON reports (the newest allocation of each node, so a re-run
# job does not bring back old results), then merge them into one fleet report:
#
#   mkdir -p reports
#   nomad job allocs -json dhv-conformance \
#     | jq -r 'group_by(.NodeID) | map(max_by(.CreateIndex)) | .[].ID' \
#     | while read -r a; do
#         nomad alloc fs "$a" alloc/data/dhv-conform/ | awk 'NR > 1 {print $NF}' \
#           | grep '\.json$' | while read -r f; do
#               nomad alloc fs "$a" "alloc/data/dhv-conform/$f" > "reports/$f"
#             done
#       done
#   dhv-conform report merge reports/ --json fleet.json --junit fleet.xml --markdown fleet.md
#
# `report merge` exits 0 when every node is conformant, 1 when one is not, 2 when a
# report is unusable (docs/fleet-schema.md). Alternatively, set var.collect_dir to
# a directory every client can write to (an NFS mount, say): each node then also
# copies its JSON reports there, and `dhv-conform report merge <that dir>` needs
# no collection step.
#
# Requirements on the clients:
#   - the raw_exec driver enabled (`plugin "raw_exec" { config { enabled = true } }`).
#     raw_exec, not exec: the checks must run the real plugins on the host, as the
#     Nomad agent runs them (same user, same file systems, same devices); exec's
#     chroot would hide the plugin dir and the tools the plugins call;
#   - the dhv-conform binary (a single static file) at var.dhv_conform, or
#     fetched by the artifact block below.
#
# The checks create and delete throwaway volumes through each plugin (10-20 MiB
# requested, in a temp dir inside the allocation, never the node's real volumes
# dir). A plugin that provisions something outside the node (a cloud disk, a
# LUN) provisions and releases it during the run.
#
# Where the plugin dir comes from: node meta `dhv_plugin_dir` when the client
# sets it (`client { meta { dhv_plugin_dir = "..." } }`, matching its
# `host_volume_plugin_dir`), else var.plugin_dir. Nomad does not publish the
# plugin dir as a node attribute; it does publish
# `plugins.host_volume.<id>.version` for every plugin it fingerprinted, which
# `dhv-conform plugins --plugin-dir DIR` reproduces.

variable "dhv_conform" {
  description = "Path of the dhv-conform binary on every client node."
  type        = string
  default     = "/usr/local/bin/dhv-conform"
}

variable "collect_dir" {
  description = "A directory every client can write to (e.g. an NFS mount) to copy the JSON reports into; empty: reports stay in the allocation."
  type        = string
  default     = ""
}

variable "plugin_dir" {
  description = "The clients' host_volume_plugin_dir, for nodes without a dhv_plugin_dir meta."
  type        = string
  default     = "/opt/nomad/data/host_volume_plugins"
}

job "dhv-conformance" {
  type        = "sysbatch"
  datacenters = ["*"]
  # Every node, whatever its node pool.
  node_pool = "all"

  constraint {
    attribute = "${attr.kernel.name}"
    value     = "linux"
  }

  group "conformance" {
    # A failed check is an answer, not a crash: never run the suite twice.
    restart {
      attempts = 0
      mode     = "fail"
    }

    task "check" {
      driver = "raw_exec"

      # To ship the binary with the job instead of installing it on the nodes:
      # artifact {
      #   source      = "https://example.com/releases/dhv-conform-linux-amd64.tar.gz"
      #   destination = "local/bin"
      # }
      # and set DHV_CONFORM below to "${NOMAD_TASK_DIR}/bin/dhv-conform".

      config {
        command = "/bin/sh"
        args    = ["${NOMAD_TASK_DIR}/check-plugins.sh"]
      }

      env {
        DHV_CONFORM        = var.dhv_conform
        PLUGIN_DIR_META    = "${meta.dhv_plugin_dir}"
        PLUGIN_DIR_DEFAULT = var.plugin_dir
        COLLECT_DIR        = var.collect_dir
        # Nomad's name for the node: the column `dhv-conform report merge` puts
        # this node's results in.
        NODE_NAME = "${node.unique.name}"
        # Reports go to the allocation's shared data dir, where `nomad alloc fs`
        # reads them (alloc/data/dhv-conform/...).
        REPORT_DIR = "${NOMAD_ALLOC_DIR}/data/dhv-conform"
        # The checks' throwaway volumes live inside the allocation, so whatever
        # a broken plugin leaves behind is removed with it.
        TMPDIR = "${NOMAD_TASK_DIR}/tmp"
      }

      # The loop over the plugin dir. `$${` is HCL's escape for a literal `${`.
      template {
        destination = "local/check-plugins.sh"
        perms       = "0755"
        data        = <<-EOF
          #!/bin/sh
          # Checks every executable in this node's host volume plugin dir.
          # Exit status: the worst dhv-conform exit code (0 all conformant,
          # 1 a plugin is not conformant, 2 bad input, 4 the harness failed).
          set -u
          dir=$PLUGIN_DIR_META
          case $dir in
            '' | '$${'*) dir=$PLUGIN_DIR_DEFAULT ;;
          esac
          node=$${NODE_NAME:-$(uname -n)}
          collect=$${COLLECT_DIR:-}
          mkdir -p "$REPORT_DIR" "$TMPDIR" || exit 4
          echo "plugin dir: $dir"
          worst=0
          found=0
          for plugin in "$dir"/*; do
            [ -f "$plugin" ] && [ -x "$plugin" ] || continue
            found=$((found + 1))
            name=$(basename "$plugin")
            out="$REPORT_DIR/$node.$name"
            "$DHV_CONFORM" check "$plugin" --quiet --node-name "$node" \
              --json "$out.json" \
              --junit "$out.junit.xml" \
              --markdown "$out.md" \
              > "$out.log" 2>&1
            code=$?
            case $code in
              0) verdict=conformant ;;
              1) verdict="NOT conformant" ;;
              *) verdict="not checked (exit $code, see $node.$name.log)" ;;
            esac
            echo "$name: $verdict"
            if [ -n "$collect" ] && [ -f "$out.json" ]; then
              cp "$out.json" "$collect/" || echo "$name: cannot copy the report to $collect"
            fi
            [ "$code" -gt "$worst" ] && worst=$code
          done
          if [ "$found" -eq 0 ]; then
            echo "no executable plugin in $dir"
          fi
          exit "$worst"
        EOF
      }

      resources {
        cpu    = 500
        memory = 256
      }
    }
  }
}
