# ktinfra image: one build, two sources.
#   docker.kt      the embedded default: a local Docker image (the "saved image" of AutoDL-like platforms)
#   amazon-ebs.kt  a GPU AMI; `ktinfra image build --source amazon-ebs` looks up source_ami with boto3
#                  and checks instance_type for AMX before packer starts.
# Parses with the Debian packer 1.6.6 (docker, amazon-ebs, ansible built in). A current HashiCorp Packer
# also needs the plugins pinned in required-plugins.pkr.hcl: `packer init images/required-plugins.pkr.hcl`.
# Driven by `ktinfra image build`, which writes the variables file; see docs/readme/image.md.

variable "profile" {
  type        = string
  description = "Stack profile name (ktinfra/data/profiles/<name>.yaml or a reduced profile file)."
}

variable "output_dir" {
  type        = string
  description = "Host directory for the build's artifacts (packages.json, packer-manifest.json)."
}

variable "playbook_file" {
  type        = string
  description = "Absolute path of the play that provisions the image (playbooks/image.yml)."
}

variable "ansible_vars_file" {
  type        = string
  description = "JSON extra-vars for the playbook (profile, env specs, wheelhouse), written by ktinfra."
}

variable "build_spec_file" {
  type        = string
  description = "JSON with each env's python and pins; read by the validate step inside the image."
}

variable "wheelhouse" {
  type        = string
  description = "Wheelhouse path inside the image/instance (ktinfra's WHEELHOUSE_IN_IMAGE, also handed to the play)."
}

variable "cleanup_keep" {
  type        = string
  default     = ""
  description = "Comma list of things cleanup keeps: wheelhouse, models, tokens."
  # refused here, before the build starts, rather than by cleanup.sh at its end
  validation {
    condition     = length([for k in split(",", var.cleanup_keep) : k if ! contains(["", "wheelhouse", "models", "tokens"], k)]) == 0
    error_message = "The cleanup_keep value must be a comma list of wheelhouse, models and tokens (or empty)."
  }
}

variable "labels" {
  type    = map(string)
  default = {}
}

# --- docker -------------------------------------------------------------------------------------------
variable "docker_base_image" {
  type    = string
  default = "ktinfra/debian12-systemd:latest"
}

variable "docker_repository" {
  type    = string
  default = "ktinfra/kt"
}

variable "docker_tag" {
  type    = string
  default = "latest"
}

variable "docker_container_name" {
  type    = string
  default = "ktinfra-image-build"
}

variable "docker_systemd" {
  type        = bool
  default     = true
  description = "Boot the build container with systemd as PID 1 (as the image runs); false: keep it alive with a shell."
}

variable "docker_systemd_run_args" {
  type        = list(string)
  description = "docker run options systemd needs (ktinfra's dockercli.SYSTEMD_RUN_ARGS, which verify boots with too)."
}

variable "wheelhouse_host_dir" {
  type        = string
  default     = "/var/cache/ktinfra/wheelhouse"
  description = "Host wheelhouse bind-mounted into the build container: warm rebuilds, and no wheels in the image."
}

# --- amazon-ebs ---------------------------------------------------------------------------------------
variable "aws_region" {
  type    = string
  default = "us-east-1"
}

variable "aws_source_ami" {
  type    = string
  default = "ami-00000000000000000"
}

variable "aws_instance_type" {
  type    = string
  default = "m7i.8xlarge"
}

variable "aws_root_device_name" {
  type    = string
  default = "/dev/sda1"
}

variable "aws_ssh_username" {
  type    = string
  default = "ubuntu"
}

variable "aws_root_volume_gb" {
  type    = number
  default = 200
  validation {
    condition     = var.aws_root_volume_gb >= 1 && floor(var.aws_root_volume_gb) == var.aws_root_volume_gb
    error_message = "The aws_root_volume_gb value must be a whole number of GB, at least 1."
  }
}

variable "aws_ami_name" {
  type        = string
  default     = "ktinfra-kt"
  description = "AMI name prefix (ktinfra's build.AMI_NAME_PREFIX): <prefix>-<profile><envs>-<timestamp>, checked by ktinfra before packer starts."
}

variable "aws_ami_envs" {
  type        = string
  default     = ""
  description = "\"-inference\" and the like when only some of the profile's envs are baked (--env), so such an AMI is not named like the full one; empty for the full image."
}

variable "aws_tags" {
  type        = map(string)
  default     = {}
  description = "Tags added to labels on the AMI, the build instance, its volumes and the AMI's snapshots (ktinfra sets ktinfra.build-started, the manifest's build.started)."
}

locals {
  wheelhouse = var.wheelhouse
  # one set for everything the build leaves or runs on AWS (EC2 gives an AMI's snapshots none of its tags),
  # named after the AMI; the build instance and its volumes as "<AMI name>-build", not packer's "Packer
  # Builder". var.aws_tags may set another Name. Written out twice: packer 1.6.6 evaluates all locals in
  # one pass (one cannot use another), and its merge() panics when every map is empty.
  aws_tags       = merge({ Name = "${var.aws_ami_name}-${var.profile}${var.aws_ami_envs}" }, var.labels, var.aws_tags)
  aws_build_tags = merge({ Name = "${var.aws_ami_name}-${var.profile}${var.aws_ami_envs}-build" }, var.labels, var.aws_tags)
  # docker builds run as root; on an AMI the communicator user (ubuntu) needs sudo for validate/cleanup
  as_root = "chmod +x {{ .Path }}; {{ .Vars }} $([ \"$(id -u)\" -eq 0 ] || echo sudo -E) {{ .Path }}"
}

source "docker" "kt" {
  image  = var.docker_base_image
  pull   = false
  commit = true
  # systemd as PID 1 (handlers such as daemon-reexec work as on a host), or a shell that keeps it alive.
  run_command = var.docker_systemd ? concat(["-d", "--name", var.docker_container_name], var.docker_systemd_run_args, ["{{.Image}}"]) : ["-d", "-i", "-t", "--name", var.docker_container_name, "--entrypoint=/bin/sh", "--", "{{.Image}}"]
  volumes     = { (var.wheelhouse_host_dir) = local.wheelhouse }
  # `ENTRYPOINT []` does not clear a build's /bin/sh entrypoint on commit; env execs systemd as PID 1.
  changes = concat(
    ["ENTRYPOINT [\"/usr/bin/env\"]", "CMD [\"/lib/systemd/systemd\"]", "ENV container=docker"],
    [for k, v in var.labels : "LABEL ${k}=${v}"]
  )
}

source "amazon-ebs" "kt" {
  region          = var.aws_region
  source_ami      = var.aws_source_ami
  instance_type   = var.aws_instance_type
  ssh_username    = var.aws_ssh_username
  ami_name        = "${var.aws_ami_name}-${var.profile}${var.aws_ami_envs}-{{timestamp}}"
  tags            = local.aws_tags
  snapshot_tags   = local.aws_tags
  run_tags        = local.aws_build_tags
  run_volume_tags = local.aws_build_tags
  # IMDSv2 on the build instance needs a current amazon plugin (packer >= 1.7, required-plugins.pkr.hcl):
  #   metadata_options { http_endpoint = "enabled", http_tokens = "required", http_put_response_hop_limit = 1 }
  # and imds_support = "v2.0" for the instances started from the AMI. packer 1.6.6 knows neither and
  # refuses the whole template on the block ("Unsupported block type"), even inside an empty dynamic block.
  launch_block_device_mappings {
    device_name           = var.aws_root_device_name
    volume_size           = var.aws_root_volume_gb
    volume_type           = "gp3"
    throughput            = 250
    iops                  = 3000
    delete_on_termination = true
  }
}

build {
  sources = ["source.docker.kt", "source.amazon-ebs.kt"]

  provisioner "ansible" {
    playbook_file   = var.playbook_file
    user            = "root"
    extra_arguments = ["--extra-vars", "@${var.ansible_vars_file}"]
    # packer 1.6.6's SSH proxy offers only ssh-rsa and has no SFTP/SCP subsystem that OpenSSH 9 accepts.
    ansible_env_vars = [
      "ANSIBLE_HOST_KEY_CHECKING=False",
      "ANSIBLE_SSH_ARGS=-o HostKeyAlgorithms=+ssh-rsa -o PubkeyAcceptedAlgorithms=+ssh-rsa -o ControlMaster=no",
      "ANSIBLE_SSH_TRANSFER_METHOD=piped",
      "ANSIBLE_PYTHON_INTERPRETER=auto_silent",
      "ANSIBLE_NOCOLOR=1",
      "ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks",
      "ANSIBLE_ROLES_PATH=${path.root}/../roles",
    ]
  }

  # Validate (like amazon-eks-ami's validate step): envs import and match their pins; packages.json comes back.
  provisioner "file" {
    source      = var.build_spec_file
    destination = "/tmp/ktinfra-build-spec.json"
  }

  provisioner "file" {
    source      = "${path.root}/scripts/validate.py"
    destination = "/tmp/ktinfra-validate.py"
  }

  provisioner "shell" {
    execute_command = local.as_root
    inline          = ["python3 /tmp/ktinfra-validate.py /tmp/ktinfra-build-spec.json /tmp/ktinfra-packages.json ${local.wheelhouse}"]
  }

  provisioner "file" {
    direction   = "download"
    source      = "/tmp/ktinfra-packages.json"
    destination = "${var.output_dir}/packages.json"
  }

  provisioner "shell" {
    execute_command  = local.as_root
    script           = "${path.root}/scripts/cleanup.sh"
    environment_vars = ["KTINFRA_KEEP=${var.cleanup_keep}", "KTINFRA_WHEELHOUSE=${local.wheelhouse}"]
  }

  post-processor "docker-tag" {
    only       = ["docker.kt"]
    repository = var.docker_repository
    tags       = [var.docker_tag]
  }

  post-processor "manifest" {
    output     = "${var.output_dir}/packer-manifest.json"
    strip_path = true
  }
}
