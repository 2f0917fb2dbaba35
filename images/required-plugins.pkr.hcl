# Only for a current HashiCorp Packer (>= 1.7; plugins are no longer bundled from 1.10 on):
#   packer init images/required-plugins.pkr.hcl
# The Debian packer 1.6.6 has docker, amazon-ebs and ansible built in and rejects this block, which is
# why it lives apart from kt.pkr.hcl (ktinfra passes that single file to packer).
packer {
  required_version = ">= 1.7.0"
  required_plugins {
    docker = {
      version = ">= 1.0.8"
      source  = "github.com/hashicorp/docker"
    }
    amazon = {
      version = ">= 1.2.0"
      source  = "github.com/hashicorp/amazon"
    }
    ansible = {
      version = ">= 1.1.0"
      source  = "github.com/hashicorp/ansible"
    }
  }
}
