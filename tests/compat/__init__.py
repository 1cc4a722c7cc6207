"""Request compatibility: launchbay against sagemaker==2.257.7."""
